package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// runSlicesCommand runs "slices args..." in an app of its own (the real app's logging
// setup may only run once per process) and returns stdout.
func runSlicesCommand(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{
		Name:      "rdma-dra",
		Commands:  []*cli.Command{slicesCommand()},
		Reader:    strings.NewReader(stdin),
		Writer:    &out,
		ErrWriter: &out,
	}
	err := app.Run(append([]string{"rdma-dra", "slices"}, args...))
	return out.String(), err
}

// decodeSlices splits the output into documents and decodes each strictly, as the API
// server would.
func decodeSlices(t *testing.T, out string) []resourceapi.ResourceSlice {
	t.Helper()
	var slices []resourceapi.ResourceSlice
	for _, doc := range strings.Split(out, "\n---\n") {
		var s resourceapi.ResourceSlice
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			t.Fatalf("decode document: %v\n%s", err, doc)
		}
		slices = append(slices, s)
	}
	return slices
}

func writeInventory(t *testing.T, inv *discovery.Inventory) string {
	t.Helper()
	data, err := discovery.MarshalInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "inventory.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSlicesCommand(t *testing.T) {
	port := discovery.Port{IBDev: "mlx5_0", Port: 1, LinkLayer: discovery.LinkLayerInfiniBand, State: "ACTIVE",
		VendorID: "15b3", PCIBusID: "0000:03:00.0", PCIeRoot: "pci0000:00", SpeedGbps: ptr.To(400)}
	second := port
	second.Port = 2
	invFile := writeInventory(t, &discovery.Inventory{NetnsMode: discovery.NetnsModeShared, Ports: []discovery.Port{port, second}})
	invJSON, err := os.ReadFile(invFile)
	if err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(configFile, []byte("modes: shared\nshares: 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		stdin       string
		args        []string
		wantNames   []string // slice names
		wantDevices []string
		wantPool    string
		wantErr     string
	}{
		{
			name:        "default model from a file",
			args:        []string{"--node", "n1", "--inventory", invFile},
			wantNames:   []string{"00000-rdma.dra.io-n1", "00001-rdma.dra.io-n1"},
			wantDevices: []string{"mlx5-0-p1", "mlx5-0-p1-shared", "mlx5-0-p2", "mlx5-0-p2-shared"},
			wantPool:    "n1-rdma",
		},
		{
			name:        "legacy from stdin, driver and pool",
			stdin:       string(invJSON),
			args:        []string{"--node", "n1", "--inventory", "-", "--legacy", "--driver", "rdma.example.com", "--pool", "p1", "--shares", "2"},
			wantNames:   []string{"00000-rdma.example.com-n1"},
			wantDevices: []string{"mlx5-0-p1-s0", "mlx5-0-p1-s1", "mlx5-0-p2-s0", "mlx5-0-p2-s1"},
			wantPool:    "p1",
		},
		{
			name:        "config file",
			args:        []string{"--node", "n1", "--inventory", invFile, "--config", configFile},
			wantNames:   []string{"00000-rdma.dra.io-n1"},
			wantDevices: []string{"mlx5-0-p1-shared", "mlx5-0-p2-shared"},
			wantPool:    "n1-rdma",
		},
		{name: "node required", args: []string{"--inventory", invFile}, wantErr: "--node is required"},
		{name: "one source", args: []string{"--node", "n1", "--inventory", invFile, "--sysfs-root", "/tmp"}, wantErr: "exclude each other"},
		{name: "bad inventory", stdin: `{"ports": [{"ibdev": 1}]}`, args: []string{"--node", "n1", "--inventory", "-"}, wantErr: "decode inventory"},
		{name: "bad config", args: []string{"--node", "n1", "--inventory", invFile, "--modes", "all"}, wantErr: "modes"},
		{name: "bad node", args: []string{"--node", "N1", "--inventory", invFile}, wantErr: `node name "N1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runSlicesCommand(t, tc.stdin, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("slices: %v\n%s", err, out)
			}
			slices := decodeSlices(t, out)
			var names, devices []string
			for _, s := range slices {
				names = append(names, s.Name)
				if s.Spec.Pool.Name != tc.wantPool || s.Spec.Pool.ResourceSliceCount != int64(len(slices)) || ptr.Deref(s.Spec.NodeName, "") != "n1" {
					t.Errorf("slice %s: pool %+v node %v", s.Name, s.Spec.Pool, s.Spec.NodeName)
				}
				if s.APIVersion != "resource.k8s.io/v1" || s.Kind != "ResourceSlice" {
					t.Errorf("slice %s: %+v", s.Name, s.TypeMeta)
				}
				for _, d := range s.Spec.Devices {
					devices = append(devices, d.Name)
				}
			}
			if strings.Join(names, " ") != strings.Join(tc.wantNames, " ") {
				t.Errorf("slices %v, want %v", names, tc.wantNames)
			}
			if strings.Join(devices, " ") != strings.Join(tc.wantDevices, " ") {
				t.Errorf("devices %v, want %v", devices, tc.wantDevices)
			}
		})
	}
}

// TestSlicesFromMockNode runs the whole path: a mock node tree, discovery, the model,
// YAML. The disabled-port profile has a DOWN port, which must come out tainted.
func TestSlicesFromMockNode(t *testing.T) {
	root := t.TempDir()
	if err := mocknode.WriteProfile("disabled-port", root, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := runSlicesCommand(t, "", "--node", "worker-1", "--sysfs-root", filepath.Join(root, mocknode.SysDir))
	if err != nil {
		t.Fatal(err)
	}
	var devices, tainted int
	for _, s := range decodeSlices(t, out) {
		for _, d := range s.Spec.Devices {
			devices++
			if len(d.Taints) > 0 {
				tainted++
			}
		}
	}
	if devices != 8 || tainted != 2 {
		t.Errorf("%d devices, %d tainted; want 8 and 2 (4 ports, one DOWN)\n%s", devices, tainted, out)
	}
}
