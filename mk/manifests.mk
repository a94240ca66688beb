# The Helm chart and the static manifests rendered from it (deployments/).

HELM_VERSION ?= v3.22.0
HELM ?= $(BIN_DIR)/helm
HELM_DOCS_VERSION ?= v1.14.2
HELM_DOCS ?= $(BIN_DIR)/helm-docs
CHART_DIR := deployments/helm/rdma-dra-driver
STATIC_DIR := deployments/static
# Build our pinned helm only when HELM is not pointed at another one.
HELM_DEP := $(filter $(BIN_DIR)/helm,$(HELM))

# Helm is built from the Go module proxy, the one download source every machine here has.
$(BIN_DIR)/helm:
	@mkdir -p $(BIN_DIR)
	GOBIN=$(abspath $(BIN_DIR)) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# The chart's README is generated from values.yaml's "# --" comments by helm-docs.
$(BIN_DIR)/helm-docs:
	@mkdir -p $(BIN_DIR)
	GOBIN=$(abspath $(BIN_DIR)) $(GO) install github.com/norwoodj/helm-docs/cmd/helm-docs@$(HELM_DOCS_VERSION)

HELM_DOCS_ARGS = --chart-search-root $(dir $(CHART_DIR)) --sort-values-order file --skip-version-footer --log-level warning

# The RdmaPool part of values.schema.json, written from the chart's CRD (hack/valuesschema:
# the pool values take the CRD's own schema of the fields they carry).
VALUES_SCHEMA := $(CHART_DIR)/values.schema.json
VALUES_SCHEMA_GEN := $(GO) run ./hack/valuesschema
# The chart tests that run helm (deployments/helm_test.go, poolvalues_test.go) get this
# Helm, and fail instead of skipping without one.
HELM_TEST_ENV = HELM='$(if $(HELM_DEP),$(abspath $(HELM)),$(HELM))' HELM_REQUIRED=1

.PHONY: manifests
manifests: $(HELM_DEP) $(filter $(BIN_DIR)/helm-docs,$(HELM_DOCS)) ## write the chart's version (VERSION) and the RdmaPool part of its values schema (the CRD), render it into deployments/static, and its README from values.yaml
	$(RELEASE_TOOL) set-chart -version $(VERSION)
	$(VALUES_SCHEMA_GEN)
	hack/render-manifests.sh $(HELM) $(STATIC_DIR)
	$(HELM_DOCS) $(HELM_DOCS_ARGS)

.PHONY: manifests-check
manifests-check: $(HELM_DEP) $(filter $(BIN_DIR)/helm-docs,$(HELM_DOCS)) ## helm lint the chart, run the tests that need helm, and fail if the values schema, deployments/static or the chart's README is stale
	$(HELM) lint --strict $(CHART_DIR)
	$(HELM) lint --strict $(CHART_DIR) --set mock.enabled=true --set nodeConfig.shares=8 \
		--set metrics.serviceMonitor.enabled=true --set rbac.claimDeviceStatus=false
	$(HELM) lint --strict $(CHART_DIR) --set metrics.serviceMonitor.enabled=true \
		--set metrics.secure=true --set metrics.tls.secretName=metrics-tls --set controller.metricsSecure=true
	$(HELM_TEST_ENV) $(GO) test -count=1 -run '^(TestHelm|TestPoolValues)' ./deployments/
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(VALUES_SCHEMA_GEN) -o "$$tmp/values.schema.json" && \
	  if ! diff -u $(VALUES_SCHEMA) "$$tmp/values.schema.json"; then \
	    echo "$(VALUES_SCHEMA) is stale (the RdmaPool CRD changed?): run make manifests and commit the result" >&2; exit 1; \
	  fi
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  hack/render-manifests.sh $(HELM) "$$tmp" && \
	  if ! diff -ru $(STATIC_DIR) "$$tmp"; then \
	    echo "deployments/static is stale: run make manifests and commit the result" >&2; exit 1; \
	  fi
	@$(HELM_DOCS) $(HELM_DOCS_ARGS) --dry-run | diff -u $(CHART_DIR)/README.md - || { \
	  echo "$(CHART_DIR)/README.md is stale: run make manifests and commit the result" >&2; exit 1; }
