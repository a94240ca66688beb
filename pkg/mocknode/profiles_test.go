package mocknode

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// portFacts are the facts of one port a profile promises in its documentation.
type portFacts struct {
	ibdev     string
	port      int
	linkLayer string
	state     string
	netdev    string
	gidIndex  int // -1: none
	speed     int
	lag       bool
	sriovVF   bool
	pcieRoot  string
}

func TestProfileFacts(t *testing.T) {
	tests := []struct {
		profile       string
		ports, ib, vf int
		facts         []portFacts
	}{
		{"dgx-h100", 10, 8, 0, []portFacts{
			{"mlx5_0", 1, "InfiniBand", "ACTIVE", "ibp24s0", -1, 400, false, false, "pci0000:15"},
			{"mlx5_7", 1, "InfiniBand", "ACTIVE", "ibp220s0", -1, 400, false, false, "pci0000:d9"},
			{"mlx5_8", 1, "Ethernet", "ACTIVE", "enp168s0f0np0", 3, 200, false, false, "pci0000:a7"},
			{"mlx5_9", 1, "Ethernet", "ACTIVE", "enp168s0f1np1", 3, 200, false, false, "pci0000:a7"},
		}},
		{"gb200", 5, 4, 0, []portFacts{
			{"mlx5_0", 1, "InfiniBand", "ACTIVE", "ibp3s0", -1, 400, false, false, "pci0000:00"},
			{"mlx5_3", 1, "InfiniBand", "ACTIVE", "ibP18p3s0", -1, 400, false, false, "pci0012:00"},
			{"mlx5_bond_0", 1, "Ethernet", "ACTIVE", "bond0", 3, 200, true, false, "pci0006:00"},
		}},
		{"gb300", 5, 4, 0, []portFacts{
			{"mlx5_0", 1, "InfiniBand", "ACTIVE", "ibp3s0", -1, 800, false, false, "pci0000:00"},
			{"mlx5_3", 1, "InfiniBand", "ACTIVE", "ibP18p3s0", -1, 800, false, false, "pci0012:00"},
			{"mlx5_bond_0", 1, "Ethernet", "ACTIVE", "bond0", 3, 200, true, false, "pci0006:00"},
		}},
		{"mixed-bond", 6, 4, 0, []portFacts{
			{"mlx5_3", 1, "InfiniBand", "ACTIVE", "ibp171s0", -1, 400, false, false, "pci0000:a8"},
			{"mlx5_4", 1, "Ethernet", "ACTIVE", "bond0", 3, 100, true, false, "pci0000:5d"},
			{"mlx5_5", 1, "Ethernet", "ACTIVE", "bond0", 3, 100, true, false, "pci0000:5d"},
		}},
		{"roce-lag", 8, 0, 0, []portFacts{
			{"mlx5_bond_0", 1, "Ethernet", "ACTIVE", "bond0", 3, 400, true, false, "pci0000:15"},
			{"mlx5_bond_7", 1, "Ethernet", "ACTIVE", "bond7", 3, 400, true, false, "pci0000:d9"},
		}},
		{"disabled-port", 4, 4, 0, []portFacts{
			{"mlx5_1", 1, "InfiniBand", "ACTIVE", "ibp64s0", -1, 400, false, false, "pci0000:3d"},
			{"mlx5_2", 1, "InfiniBand", "DOWN", "ibp154s0", -1, 10, false, false, "pci0000:97"},
		}},
		{"vpi-dual-port", 2, 1, 0, []portFacts{
			{"mlx4_0", 1, "InfiniBand", "ACTIVE", "ibp5s0", -1, 56, false, false, "pci0000:00"},
			{"mlx4_0", 2, "Ethernet", "ACTIVE", "enp5s0d1", 3, 40, false, false, "pci0000:00"},
		}},
		{"sriov", 17, 0, 16, []portFacts{
			{"mlx5_0", 1, "Ethernet", "ACTIVE", "enp59s0f0np0", 3, 100, false, false, "pci0000:3a"},
			{"mlx5_1", 1, "Ethernet", "ACTIVE", "enp59s0f0v0", 3, 100, false, true, "pci0000:3a"},
			{"mlx5_9", 1, "Ethernet", "ACTIVE", "enp59s0f0v8", -1, 100, false, true, "pci0000:3a"},
			{"mlx5_13", 1, "Ethernet", "ACTIVE", "enp59s0f0v12", 3, 100, false, true, "pci0000:3a"},
			{"mlx5_16", 1, "Ethernet", "ACTIVE", "enp59s0f0v15", 7, 100, false, true, "pci0000:3a"},
		}},
		{"soft-roce", 1, 0, 0, []portFacts{
			{"rxe0", 1, "Ethernet", "ACTIVE", "ens3", 3, 2, false, false, ""},
		}},
		{"intel-e810", 2, 0, 0, []portFacts{
			{"irdma0", 1, "Ethernet", "ACTIVE", "enp81s0f0", 1, 100, false, false, "pci0000:50"},
			{"irdma1", 1, "Ethernet", "ACTIVE", "enp81s0f1", -1, 100, false, false, "pci0000:50"},
		}},
		{"broadcom", 2, 0, 0, []portFacts{
			{"bnxt_re0", 1, "Ethernet", "ACTIVE", "enp65s0f0np0", 5, 100, false, false, "pci0000:40"},
			{"bnxt_re1", 1, "Ethernet", "ACTIVE", "enp65s0f1np1", 3, 100, false, false, "pci0000:40"},
		}},
		{"large", 320, 32, 256, []portFacts{
			{"mlx5_0", 1, "InfiniBand", "ACTIVE", "ibp3s0", -1, 400, false, false, "pci0000:00"},
			{"mlx5_63", 1, "Ethernet", "ACTIVE", "enP1p230s0f0np0", 3, 400, false, false, "pci0001:e0"},
			{"mlx5_319", 1, "Ethernet", "ACTIVE", "enP1p230s0f0v7", 3, 400, false, true, "pci0001:e0"},
		}},
	}
	if len(tests) != len(Profiles()) {
		t.Errorf("%d profiles have facts, want all %d", len(tests), len(Profiles()))
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			p, err := Lookup(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			n := p.Node()
			if err := n.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			ports := n.ExpectedPorts()
			ib, vf := 0, 0
			byKey := map[string]discovery.Port{}
			for _, e := range ports {
				if e.LinkLayer == "InfiniBand" {
					ib++
				}
				if e.SRIOVVF {
					vf++
				}
				byKey[e.IBDev+"/"+strconv.Itoa(e.Port)] = e
			}
			if len(ports) != tc.ports || ib != tc.ib || vf != tc.vf {
				t.Errorf("ports, InfiniBand, VFs = %d, %d, %d; want %d, %d, %d", len(ports), ib, vf, tc.ports, tc.ib, tc.vf)
			}
			for _, want := range tc.facts {
				e, ok := byKey[want.ibdev+"/"+strconv.Itoa(want.port)]
				if !ok {
					t.Errorf("%s port %d missing", want.ibdev, want.port)
					continue
				}
				gid := -1
				if e.GIDIndex != nil {
					gid = *e.GIDIndex
				}
				got := portFacts{e.IBDev, e.Port, e.LinkLayer, e.State, e.Netdev, gid, deref(e.SpeedGbps), e.LAG, e.SRIOVVF, e.PCIeRoot}
				if got != want {
					t.Errorf("got  %+v\nwant %+v", got, want)
				}
			}
		})
	}
}

// TestProfileGPUs checks the GPU-side facts the GPU profiles promise: on dgx-h100 one GPU
// on each InfiniBand port's PCIe root and gpudirect peermem everywhere; on gb300 each
// InfiniBand port's Data Direct function on its GPU's root, which is not the PF's, and
// gpudirect dmabuf everywhere. GPUs are found as other code finds them: every function
// of vendor 0x10de and a display class, its root the pciDDDD:BB element of its path.
func TestProfileGPUs(t *testing.T) {
	tests := []struct {
		profile   string
		gpudirect string
		// dataDirect says that each InfiniBand port reaches its GPU through a Data
		// Direct function; else the GPU shares the port's own root.
		dataDirect bool
		gpus       int
	}{
		{profile: "dgx-h100", gpudirect: discovery.GPUDirectPeermem, gpus: 8},
		{profile: "gb300", gpudirect: discovery.GPUDirectDMABuf, dataDirect: true, gpus: 4},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			p, _ := Lookup(tt.profile)
			n := p.Node()
			dir := t.TempDir()
			if err := n.Write(dir, WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			gpuRoots := gpuRootsOf(t, filepath.Join(dir, SysDir))
			if len(gpuRoots) != tt.gpus {
				t.Errorf("%d GPUs on %d roots, want %d GPUs each on a root of its own: %v", len(n.GPUs), len(gpuRoots), tt.gpus, gpuRoots)
			}
			ib := 0
			for _, e := range n.ExpectedPorts() {
				if e.GPUDirect != tt.gpudirect {
					t.Errorf("%s: gpudirect %q, want %q", e.IBDev, e.GPUDirect, tt.gpudirect)
				}
				if e.LinkLayer != "InfiniBand" {
					if e.DataDirectBusID != "" {
						t.Errorf("%s: Data Direct %s on a port without one", e.IBDev, e.DataDirectBusID)
					}
					continue
				}
				ib++
				gpuRoot := e.PCIeRoot
				if tt.dataDirect {
					if e.DataDirectBusID == "" || e.DataDirectPCIeRoot == e.PCIeRoot {
						t.Errorf("%s: Data Direct %s on %s, want one on a root other than the PF's %s", e.IBDev, e.DataDirectBusID, e.DataDirectPCIeRoot, e.PCIeRoot)
					}
					gpuRoot = e.DataDirectPCIeRoot
				} else if e.DataDirectBusID != "" {
					t.Errorf("%s: Data Direct %s, want none", e.IBDev, e.DataDirectBusID)
				}
				if gpuRoots[gpuRoot] != 1 {
					t.Errorf("%s: %d GPUs on %s, want 1", e.IBDev, gpuRoots[gpuRoot], gpuRoot)
				}
			}
			if ib != tt.gpus {
				t.Errorf("%d InfiniBand ports, want one per GPU (%d)", ib, tt.gpus)
			}
		})
	}
}

// gpuRootsOf counts the GPUs of a written tree by PCIe root.
func gpuRootsOf(t *testing.T, root string) map[string]int {
	t.Helper()
	out := map[string]int{}
	entries, err := os.ReadDir(filepath.Join(root, "bus/pci/devices"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		dir := filepath.Join(root, "bus/pci/devices", e.Name())
		vendor, _ := os.ReadFile(filepath.Join(dir, "vendor"))
		class, _ := os.ReadFile(filepath.Join(dir, "class"))
		if string(vendor) != "0x10de\n" || !strings.HasPrefix(string(class), "0x03") {
			continue
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, real)
		out[strings.Split(filepath.ToSlash(rel), "/")[1]]++
	}
	return out
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func TestLookup(t *testing.T) {
	names := []string{}
	for _, p := range Profiles() {
		names = append(names, p.Name)
		if p.Description == "" || strings.Contains(p.Description, "\n") {
			t.Errorf("%s: description %q is not one line", p.Name, p.Description)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("Profiles() not sorted: %v", names)
	}
	tests := []struct {
		name    string
		wantErr string
	}{
		{"dgx-h100", ""},
		{"soft-roce", ""},
		{"dgx-a100", `unknown profile "dgx-a100", known profiles: broadcom, dgx-h100,`},
		{"", "unknown profile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Lookup(tc.name)
			if tc.wantErr == "" {
				if err != nil || p.Name != tc.name {
					t.Errorf("Lookup = %q, %v", p.Name, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Lookup error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestProfileNodesAreFresh guards against profiles sharing slices between calls: a test
// that edits its node must not change the next caller's.
func TestProfileNodesAreFresh(t *testing.T) {
	p, _ := Lookup("sriov")
	a := p.Node()
	a.RDMADevices[0].Ports[0].GIDs[0].Index = 99
	a.PCIFunctions[0].Bridges[0] = "changed"
	if b := p.Node(); b.RDMADevices[0].Ports[0].GIDs[0].Index != 0 || b.PCIFunctions[0].Bridges[0] != "0000:3a:00.0" {
		t.Error("a second Node() shares state with the first")
	}
}

// TestDeterministic lays every profile out twice, and writes two of them twice, and
// requires identical results.
func TestDeterministic(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			a, errA := p.Node().layout()
			b, errB := p.Node().layout()
			if errA != nil || errB != nil {
				t.Fatalf("layout: %v, %v", errA, errB)
			}
			if !reflect.DeepEqual(a.entries, b.entries) {
				t.Error("two layouts of the same profile differ")
			}
		})
	}
	for _, name := range []string{"sriov", "mixed-bond"} {
		t.Run("write "+name, func(t *testing.T) {
			p, _ := Lookup(name)
			var snaps []map[string]string
			for range 2 {
				dir := t.TempDir()
				if err := p.Node().Write(dir, WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				snaps = append(snaps, snapshot(t, dir))
			}
			if !reflect.DeepEqual(snaps[0], snaps[1]) {
				t.Error("two writes of the same profile differ")
			}
		})
	}
}

// snapshot maps every path below dir to what it is: a directory, a link and its target,
// or a file and its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "link " + target
			return err
		case info.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			out[rel] = "file " + string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
