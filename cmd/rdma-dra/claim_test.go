package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClaimDefaults: the command with only --gpus and --align writes the package's golden
// file, so the flags' defaults are those the golden file was made with.
func TestClaimDefaults(t *testing.T) {
	want, err := os.ReadFile("../../pkg/claimgen/testdata/gpus-8-align-pcie.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runApp(t, "", "claim", "--gpus", "8", "--align", "pcie")
	if code != 0 || stderr != "" {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	if diff := cmp.Diff(string(want), stdout); diff != "" {
		t.Errorf("(-golden +command):\n%s", diff)
	}
}

func TestClaimMessages(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		code      int
		stderr    string
		stdoutHas []string
	}{
		{name: "no --gpus", args: []string{"claim"}, code: 2, stderr: "rdma-dra: --gpus is required (1 to 64)\n"},
		{name: "a positional count", args: []string{"claim", "8"}, code: 2, stderr: `rdma-dra: claim takes no arguments, got "8"` + "\n"},
		{name: "more NICs than GPUs", args: []string{"claim", "--gpus", "4", "--nics", "6"}, code: 2,
			stderr: "rdma-dra: --nics 6 is more than --gpus 4: with --align pcie each NIC shares resource.kubernetes.io/pcieRoot with a GPU of its own, " +
				"so 2 NICs would have no GPU to align with; ask for at most 4 NICs, or use --align none\n"},
		{name: "explicit zero NICs", args: []string{"claim", "--gpus", "4", "--nics", "0"}, code: 2, stderr: "rdma-dra: --nics must be 1 to 64, got 0\n"},
		{name: "more than a claim holds", args: []string{"claim", "--gpus", "64"}, code: 2,
			stderr: "rdma-dra: --gpus 64 and --nics 64 are 128 devices, but a claim holds at most 32 (resource.k8s.io/v1): give the pod two claims, each with its share of the pairs\n"},
		{name: "numa on NVIDIA's GPUs warns", args: []string{"claim", "--gpus", "2", "--align", "numa"}, code: 0,
			stderr:    "warning: --align numa: the GPU driver of gpu.nvidia.com publishes no resource.kubernetes.io/numaNode for its GPUs, so this claim is never allocated; use --align pcie\n",
			stdoutHas: []string{"matchAttribute: resource.kubernetes.io/numaNode\n"}},
		{name: "unaligned NICs", args: []string{"claim", "--gpus", "1", "--nics", "2", "--align", "none", "--kind", "ResourceClaim", "--name", "one-gpu"}, code: 0,
			stdoutHas: []string{"kind: ResourceClaim\n", "  name: one-gpu\n", "name: nic-1\n"}},
		{name: "flags from the environment", args: []string{"claim"}, code: 0,
			env:       map[string]string{"RDMA_DRA_CLAIM_GPUS": "2", "RDMA_DRA_CLAIM_GPUDIRECT": "any", "RDMA_DRA_CLAIM_DISTINCT_RAILS": "true", "RDMA_DRA_CLAIM_NAMESPACE": "ml"},
			stdoutHas: []string{"  name: gpu-nic-2x2\n  namespace: ml\n", `?gpudirect.orValue("")`, `in ["dmabuf", "peermem"]`, "distinctAttribute: rdma.dra.io/rail\n"}},
		{name: "unknown gpudirect", args: []string{"claim", "--gpus", "2", "--gpudirect", "yes"}, code: 2,
			stderr: `rdma-dra: unknown --gpudirect "yes": want dmabuf, peermem or any` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			stdout, stderr, code := runApp(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d\nstderr %s", code, tt.code, stderr)
			}
			if stderr != tt.stderr {
				t.Errorf("stderr:\n%q\nwant:\n%q", stderr, tt.stderr)
			}
			if tt.code != 0 && stdout != "" {
				t.Errorf("stdout should be empty on failure:\n%s", stdout)
			}
			for _, s := range tt.stdoutHas {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
		})
	}
}
