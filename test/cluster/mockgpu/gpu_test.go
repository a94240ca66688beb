package mockgpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiscover(t *testing.T) {
	tests := []struct {
		name string
		// root returns the sysfs root to discover.
		root    func(t *testing.T) string
		want    []GPU
		wantErr string
	}{{
		name: "GPU server",
		root: func(t *testing.T) string { return writeNode(t, fixtureFunctions()) },
		want: fixtureGPUs(),
	}, {
		name: "no GPUs",
		root: func(t *testing.T) string { return writeNode(t, fixtureFunctions()[2:4]) },
	}, {
		name: "no bus/pci/devices",
		root: func(t *testing.T) string { return t.TempDir() },
	}, {
		name: "malformed class of an NVIDIA function",
		root: func(t *testing.T) string {
			root := writeNode(t, fixtureFunctions())
			overwrite(t, root, "0000:9a:00.0", "class", "display\n")
			return root
		},
		wantErr: "PCI function 0000:9a:00.0: parse bus/pci/devices/0000:9a:00.0/class",
	}, {
		name: "malformed numa_node",
		root: func(t *testing.T) string {
			root := writeNode(t, fixtureFunctions())
			overwrite(t, root, "0000:1b:00.0", "numa_node", "zero\n")
			return root
		},
		wantErr: "PCI function 0000:1b:00.0: parse bus/pci/devices/0000:1b:00.0/numa_node",
	}, {
		name: "missing numa_node is unknown",
		root: func(t *testing.T) string {
			root := writeNode(t, fixtureFunctions()[:1])
			remove(t, root, "0000:9a:00.0", "numa_node")
			return root
		},
		want: []GPU{{Name: "gpu-0", Index: 0, BusID: "0000:9a:00.0", PCIeRoot: "pci0000:97", DeviceID: "2330"}},
	}, {
		name:    "missing root",
		root:    func(t *testing.T) string { return filepath.Join(t.TempDir(), "nothing") },
		wantErr: "open sysfs root",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Discover(tt.root(t))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Discover() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Discover() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Discover() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModel(t *testing.T) {
	tests := []struct {
		deviceID, want string
	}{
		{"2330", "H100"},
		{"2335", "H200"},
		{"31c2", "GB300"},
		{"9999", "10de:9999"},
	}
	for _, tt := range tests {
		t.Run(tt.deviceID, func(t *testing.T) {
			if got := (GPU{DeviceID: tt.deviceID}).Model(); got != tt.want {
				t.Errorf("Model() = %q, want %q", got, tt.want)
			}
		})
	}
}

// functionFile is the path of a file of the PCI function busID below root, through the
// link in bus/pci/devices.
func functionFile(t *testing.T, root, busID, file string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(filepath.Join(root, "bus", "pci", "devices", busID))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, file)
}

func overwrite(t *testing.T, root, busID, file, content string) {
	t.Helper()
	if err := os.WriteFile(functionFile(t, root, busID, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, root, busID, file string) {
	t.Helper()
	if err := os.Remove(functionFile(t, root, busID, file)); err != nil {
		t.Fatal(err)
	}
}
