package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// TestDoctorOnTheNode runs `rdma-dra doctor` (built from the tree) on the local cluster's
// node: the mock node's sysfs and device trees, the real containerd that runs the
// cluster's pods, found in /proc with its config file, and the cluster through its
// kubeconfig. Nothing may fail, and the checks the driver cannot do without (modules,
// devices and their nodes, CDI and NRI of the running containerd, the CDI directory, the
// API server's and the kubelet's versions, resource.k8s.io/v1, and the partitionable
// device model, which the local cluster's 1.37 keeps) must be OK; warnings are logged.
func TestDoctorOnTheNode(t *testing.T) {
	env.NeedMockNode(t)
	// The CLI runs where the suite runs: on the local cluster, that is the node.
	if _, local := env.NeedHost(t, "run rdma-dra doctor on the node").(*framework.LocalHost); !local {
		t.Skip("needs to run rdma-dra doctor on the node itself: only the local cluster's node is the suite's machine")
	}
	ctx := framework.Context(t, 2*time.Minute)
	paths := env.Host.Paths()
	stdout, stderr, err := env.RdmaDra(ctx, "doctor", "-o", "json",
		"--sysfs-root", paths.SysRoot, "--dev-root", paths.DevRoot,
		"--containerd-config", paths.ContainerdConfig, "--cdi-dirs", paths.CDIDir,
		"--kubeconfig", env.Kubeconfig, "--node", env.Node)
	if err != nil {
		t.Fatalf("rdma-dra doctor: %v\n%s%s", err, stdout, stderr)
	}
	var doc struct {
		Version string `json:"version"`
		Checks  []struct {
			Check, Status, Found, Fix string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("decode the doctor's document: %v\n%s", err, stdout)
	}
	got := map[string]string{}
	for _, c := range doc.Checks {
		got[c.Check] = c.Status
		t.Logf("%-4s %s: %s", c.Status, c.Check, c.Found)
		if c.Status == "FAIL" {
			t.Errorf("%s failed: %s; fix: %s", c.Check, c.Found, c.Fix)
		}
	}
	for _, name := range []string{"kernel-modules", "rdma-devices", "char-devices", "rdma-netns",
		"container-runtime", "containerd-cdi", "cdi-spec-dirs", "containerd-nri", "ibdev2netdev",
		"kubernetes-version", "dra-api", "kubelet-version", "device-model"} {
		if got[name] != "OK" {
			t.Errorf("check %s: %q, want OK", name, got[name])
		}
	}
}
