// Package demo checks the demos' files: the kind cluster config of demo/kind is valid for
// kind (here, so that the driver's module does not depend on kind).
package demo

import (
	"os"
	"slices"
	"strings"
	"testing"

	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// kindDir is the kind demo, from test/demo.
const kindDir = "../../demo/kind"

// decodeConfig decodes a kind cluster config strictly with kind's own types: an unknown
// or misspelled field is an error here, where kind would ignore it.
func decodeConfig(data []byte) (*kindv1alpha4.Cluster, error) {
	var c kindv1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func TestKindConfig(t *testing.T) {
	data, err := os.ReadFile(kindDir + "/kind-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeConfig(data)
	if err != nil {
		t.Fatalf("decode kind-config.yaml: %v", err)
	}
	script, err := os.ReadFile(kindDir + "/up.sh")
	if err != nil {
		t.Fatal(err)
	}

	checks := []struct {
		what string
		ok   bool
	}{
		{"kind Cluster v1alpha4", c.Kind == "Cluster" && c.APIVersion == "kind.x-k8s.io/v1alpha4"},
		{"one node", len(c.Nodes) == 1},
		{"CDI on in containerd", slices.ContainsFunc(c.ContainerdConfigPatches, func(p string) bool {
			return strings.Contains(p, `[plugins."io.containerd.grpc.v1.cri"]`) && strings.Contains(p, "enable_cdi = true")
		})},
		{"partitionable devices and consumable capacity", c.FeatureGates["DRAPartitionableDevices"] && c.FeatureGates["DRAConsumableCapacity"]},
		{"extended resources for legacy pods", c.FeatureGates["DRAExtendedResource"]},
		{"resource.k8s.io/v1 served", c.RuntimeConfig["resource.k8s.io/v1"] == "true"},
		{"up.sh uses this config", strings.Contains(string(script), "--config demo/kind/kind-config.yaml")},
		{"up.sh names the same cluster", strings.Contains(string(script), "CLUSTER_NAME:-"+c.Name+"}")},
	}
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("kind-config.yaml: want %s", ck.what)
		}
	}

	// The mock tree: up.sh writes it where the config mounts it from, and the mount
	// lands where the chart's mock values look (deployments/helm values mock.*).
	if len(c.Nodes) == 1 {
		var found bool
		for _, m := range c.Nodes[0].ExtraMounts {
			if m.ContainerPath != "/var/lib/rdma-dra/mock" {
				continue
			}
			found = true
			if !strings.Contains(string(script), "mock_dir="+m.HostPath+" ") {
				t.Errorf("up.sh does not write the mock tree to %s, the mount's hostPath", m.HostPath)
			}
		}
		if !found {
			t.Error("no extraMount of the mock tree at /var/lib/rdma-dra/mock")
		}
	}
	values, err := os.ReadFile("../../deployments/helm/rdma-dra-driver/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sysfsRoot: /var/lib/rdma-dra/mock/sys", "devRoot: /var/lib/rdma-dra/mock/dev"} {
		if !strings.Contains(string(values), want) {
			t.Errorf("chart values do not have %q below the kind mount", want)
		}
	}
}

func TestDecodeConfigIsStrict(t *testing.T) {
	tests := []struct {
		name, doc string
		wantErr   bool
	}{
		{"valid", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes: [{role: control-plane}]\n", false},
		{"misspelled top-level field", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nfeatureGate: {A: true}\n", true},
		{"misspelled mount field", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes: [{role: control-plane, extraMounts: [{hostPth: /x, containerPath: /y}]}]\n", true},
		{"wrong type", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nfeatureGates: {A: yes-please}\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeConfig([]byte(tt.doc))
			if (err != nil) != tt.wantErr {
				t.Errorf("decode: error %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
