package deployments

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const chartDir = "helm/rdma-dra-driver"

// helmBinary returns the Helm that mk/manifests.mk builds (../_output/bin/helm), or $HELM.
// Without one the tests that run it skip; make manifests-check sets HELM_REQUIRED=1, and
// there they fail instead.
func helmBinary(t *testing.T) string {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		helm = filepath.Join("..", "_output", "bin", "helm")
	}
	if _, err := exec.LookPath(helm); err != nil {
		if os.Getenv("HELM_REQUIRED") == "1" {
			t.Fatalf("no helm at %s (HELM): %v", helm, err)
		}
		t.Skipf("no helm at %s: build it with make _output/bin/helm, or set HELM", helm)
	}
	return helm
}

// runHelm runs helm with args and returns its standard output, or an error with its
// standard error.
func runHelm(t *testing.T, helm string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// TestHelmWithoutFlags: helm template and helm lint of the chart need no --kube-version,
// whatever Kubernetes version the Helm binary assumes (1.20 for one built with go install,
// like the Makefile's).
func TestHelmWithoutFlags(t *testing.T) {
	helm := helmBinary(t)
	out, err := runHelm(t, helm, "template", chartDir)
	if err != nil {
		t.Fatalf("helm template %s: %v", chartDir, err)
	}
	if !strings.Contains(out, "kind: DaemonSet") {
		t.Errorf("helm template rendered no DaemonSet:\n%s", out)
	}
	if _, err := runHelm(t, helm, "lint", "--strict", chartDir); err != nil {
		t.Errorf("helm lint --strict %s: %v", chartDir, err)
	}
}

// TestHelmClusterVersion: on a cluster Helm talks to (it then lists
// apiregistration.k8s.io/v1), the chart refuses Kubernetes before 1.34 by name.
func TestHelmClusterVersion(t *testing.T) {
	helm := helmBinary(t)
	const server = "apiregistration.k8s.io/v1"
	tests := []struct {
		name, kubeVersion, apiVersions, wantErr string
	}{
		{name: "too old", kubeVersion: "1.33.9", apiVersions: server,
			wantErr: "rdma-dra-driver needs Kubernetes 1.34.0 or later (resource.k8s.io/v1); the cluster runs v1.33.9"},
		{name: "oldest supported", kubeVersion: "1.34.0", apiVersions: server},
		{name: "vendor build of the oldest", kubeVersion: "1.34.1-gke.1200", apiVersions: server},
		{name: "newer", kubeVersion: "1.37.1", apiVersions: server},
		// Without a server Helm cannot tell --kube-version from its built-in default.
		{name: "no server", kubeVersion: "1.30.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"template", chartDir, "--kube-version", tt.kubeVersion}
			if tt.apiVersions != "" {
				args = append(args, "--api-versions", tt.apiVersions)
			}
			_, err := runHelm(t, helm, args...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("helm template: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("helm template: error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
