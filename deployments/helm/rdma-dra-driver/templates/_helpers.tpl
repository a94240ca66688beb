{{/*
Names and labels shared by every template. A name is cut to 63 characters so that it stays a
valid label value; the kubelet plugin's objects carry the component label "kubelet-plugin".
*/}}

{{- define "rdma-dra-driver.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rdma-dra-driver.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "rdma-dra-driver.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "rdma-dra-driver.labels" -}}
helm.sh/chart: {{ include "rdma-dra-driver.chart" . }}
{{ include "rdma-dra-driver.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: rdma-dra-driver
{{- end }}

{{/* Labels that select the release's pods; they never change after install. */}}
{{- define "rdma-dra-driver.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rdma-dra-driver.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rdma-dra-driver.kubeletPlugin.selectorLabels" -}}
{{ include "rdma-dra-driver.selectorLabels" . }}
app.kubernetes.io/component: kubelet-plugin
{{- end }}

{{- define "rdma-dra-driver.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-kubelet-plugin" (include "rdma-dra-driver.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference; the tag defaults to the chart's appVersion. */}}
{{- define "rdma-dra-driver.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Directories on the host; every one is mounted at the same path in the container so that
the paths the plugin writes into CDI specs and sockets are valid on the host too. */}}
{{- define "rdma-dra-driver.pluginDir" -}}
{{- printf "%s/plugins/%s" (trimSuffix "/" .Values.kubeletDir) .Values.driverName }}
{{- end }}

{{- define "rdma-dra-driver.sysfsRoot" -}}
{{- if .Values.mock.enabled }}{{ .Values.mock.sysfsRoot }}{{ else }}/sys{{ end }}
{{- end }}

{{- define "rdma-dra-driver.rdmaKernel" -}}
{{- if .Values.networkAttachment.rdmaKernel }}{{ .Values.networkAttachment.rdmaKernel }}{{ else if .Values.mock.enabled }}emulated{{ else }}sysfs{{ end }}
{{- end }}

{{- define "rdma-dra-driver.devRoot" -}}
{{- if .Values.mock.enabled }}{{ .Values.mock.devRoot }}{{ else }}/dev{{ end }}
{{- end }}

{{- define "rdma-dra-driver.controller.selectorLabels" -}}
{{ include "rdma-dra-driver.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/* Names of the controller's objects; the controller gets them as flags, and its RBAC
names them as resourceNames. */}}
{{- define "rdma-dra-driver.controller.name" -}}
{{- printf "%s-controller" (include "rdma-dra-driver.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rdma-dra-driver.webhook.name" -}}
{{- printf "%s-webhook" (include "rdma-dra-driver.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rdma-dra-driver.webhook.secretName" -}}
{{- printf "%s-webhook-cert" (include "rdma-dra-driver.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Secure /metrics (pkg/metricsauth): "true" or empty, for the plugin and the
controller. Their TLS Secret is mounted at metricsTLSDir. */}}
{{- define "rdma-dra-driver.metrics.pluginSecure" -}}
{{- if and .Values.metrics.enabled .Values.metrics.secure }}true{{ end }}
{{- end }}

{{- define "rdma-dra-driver.metrics.controllerSecure" -}}
{{- if and .Values.controller.enabled .Values.controller.metricsSecure }}true{{ end }}
{{- end }}

{{- define "rdma-dra-driver.metricsTLSDir" -}}
/var/run/secrets/rdma-dra/metrics-tls
{{- end }}

{{/*
The node configuration the plugin reads: nodeConfig, plus the legacyResources entry of
pools.legacy when it is enabled (its ports are chosen on the node). Empty when there is
nothing to write, so that the plugin runs on its defaults.
*/}}
{{- define "rdma-dra-driver.nodeConfig" -}}
{{- $cfg := deepCopy (.Values.nodeConfig | default dict) }}
{{- with .Values.pools.legacy }}
{{- if .enabled }}
{{- $entry := dict "name" .name }}
{{- with .maxPods }}{{ $_ := set $entry "maxPods" . }}{{ end }}
{{- with .selectors }}{{ $_ := set $entry "selectors" . }}{{ end }}
{{- $_ := set $cfg "legacyResources" (append ($cfg.legacyResources | default list) $entry) }}
{{- end }}
{{- end }}
{{- if $cfg }}{{ toYaml $cfg }}{{ end }}
{{- end }}

{{/*
"true" when the node configuration gates ports on fabric readiness: the plugin then
watches ResourceClaims (docs/kubelet-plugin.md, Fabric readiness) and writes their
binding conditions into status.devices, which needs rbac.claimDeviceStatus.
*/}}
{{- define "rdma-dra-driver.fabricReadiness" -}}
{{- if dig "fabricReadiness" "enabled" false (.Values.nodeConfig | default dict) }}
{{- if not .Values.rbac.claimDeviceStatus }}
{{- fail "nodeConfig.fabricReadiness.enabled needs rbac.claimDeviceStatus: the plugin answers the binding conditions in the claims' status.devices" }}
{{- end }}true
{{- end }}
{{- end }}
