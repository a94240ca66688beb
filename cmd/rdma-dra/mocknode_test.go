package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// runMockNodeCommand runs "mock-node args..." in an app of its own and returns stdout.
func runMockNodeCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{
		Name:      "rdma-dra",
		Commands:  []*cli.Command{mockNodeCommand()},
		Writer:    &out,
		ErrWriter: &out,
	}
	err := app.Run(append([]string{"rdma-dra", "mock-node"}, args...))
	return out.String(), err
}

func TestMockNodeCommand(t *testing.T) {
	used := filepath.Join(t.TempDir(), "used")
	if _, err := runMockNodeCommand(t, "--profile", "soft-roce", "--out", used); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		wantOut []string
	}{
		{name: "list", args: []string{"--list"}, wantOut: []string{"PROFILE", "DESCRIPTION", "dgx-h100", "soft-RoCE rxe0", "vpi-dual-port"}},
		{name: "list from env", env: map[string]string{"MOCK_NODE_LIST": "true"}, wantOut: []string{"roce-lag"}},
		{name: "unknown profile", args: []string{"--profile", "dgx-b200", "--out", "OUT"},
			wantErr: `unknown profile "dgx-b200", known profiles: broadcom, dgx-h100, disabled-port`},
		{name: "missing out", args: []string{"--profile", "sriov"}, wantErr: "--profile and --out are required"},
		{name: "missing profile", args: []string{"--out", "OUT"}, wantErr: "--list shows the profiles"},
		{name: "write", args: []string{"--profile", "intel-e810", "--out", "OUT"}, wantOut: []string{
			`Wrote mock node "intel-e810"`, "2 RDMA devices, 2 ports (0 InfiniBand, 2 Ethernet)",
			"rdma-dra discover --sysfs-root OUT/sys", "OUT/chardevs (3 lines", "rerun with --mknod",
		}},
		{name: "write from env", env: map[string]string{"MOCK_NODE_PROFILE": "broadcom", "MOCK_NODE_OUT": "OUT"},
			wantOut: []string{`Wrote mock node "broadcom"`}},
		{name: "non-empty target", args: []string{"--profile", "sriov", "--out", used}, wantErr: "is not empty"},
		{name: "force", args: []string{"--profile", "sriov", "--out", used, "--force"}, wantOut: []string{"17 RDMA devices"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "node")
			for k, v := range tc.env {
				t.Setenv(k, strings.ReplaceAll(v, "OUT", out))
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "OUT", out)
			}
			stdout, err := runMockNodeCommand(t, args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("error = %v\n%s", err, stdout)
			}
			for _, w := range tc.wantOut {
				if w = strings.ReplaceAll(w, "OUT", out); !strings.Contains(stdout, w) {
					t.Errorf("output does not contain %q:\n%s", w, stdout)
				}
			}
		})
	}
}

func TestMockNodeCommandMknod(t *testing.T) {
	out := t.TempDir()
	devRoot := filepath.Join(t.TempDir(), "dev")
	stdout, err := runMockNodeCommand(t, "--profile", "vpi-dual-port", "--out", filepath.Join(out, "node"), "--mknod", "--dev-root", devRoot)
	if os.Geteuid() != 0 {
		if err == nil || !strings.Contains(err.Error(), "CAP_MKNOD") {
			t.Fatalf("--mknod without privileges = %v, want an error naming CAP_MKNOD", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("mock-node --mknod: %v\n%s", err, stdout)
	}
	if !strings.Contains(stdout, "--dev-root "+devRoot) {
		t.Errorf("output does not tell how to use %s:\n%s", devRoot, stdout)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(devRoot, "infiniband", "issm1"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 231 || unix.Minor(st.Rdev) != 65 {
		t.Errorf("issm1: mode %o rdev %d:%d, want a character device 231:65", st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
}

// TestMockNodeDiscoverRoundTrip writes every profile through the command and checks that
// discovery finds what the profile's description says it should.
func TestMockNodeDiscoverRoundTrip(t *testing.T) {
	for _, p := range mocknode.Profiles() {
		if p.Name == "large" {
			continue // the benchmarks cover it; its 20000 files take long on a busy disk
		}
		t.Run(p.Name, func(t *testing.T) {
			out := t.TempDir()
			if _, err := runMockNodeCommand(t, "--profile", p.Name, "--out", out, "--force"); err != nil {
				t.Fatal(err)
			}
			inv, err := discovery.New(discovery.Options{SysfsRoot: filepath.Join(out, "sys")}).Discover(context.Background())
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if diff := cmp.Diff(p.Node().ExpectedPorts(), inv.Ports, cmpopts.IgnoreFields(discovery.Port{}, "Model")); diff != "" {
				t.Errorf("discovery differs from the profile (-want +got):\n%s", diff)
			}
		})
	}
}
