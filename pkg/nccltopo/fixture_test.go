package nccltopo

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Fixtures are mocknode trees, which carry every file this package reads: the bridges on
// the paths of the functions and GPUs, the links, the NUMA nodes' cpumaps and the CPU
// modalias (mocknode's Platform). Tests that need an edge case change the written tree.

// Link speeds as sysfs prints them.
const (
	gen5 = "32.0 GT/s PCIe"
	gen4 = "16.0 GT/s PCIe"
)

// writeFixture writes n below a temporary directory and returns its sysfs and root.
func writeFixture(t *testing.T, n *mocknode.Node) (*sysfs.FS, string) {
	t.Helper()
	dir := t.TempDir()
	if err := n.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, mocknode.SysDir)
	fsys, err := sysfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return fsys, root
}

// linkCap is what a function's or bridge's link files say; the zero linkCap has none.
type linkCap struct {
	speed string
	width int
}

// setLinks overwrites the link files of the functions and bridges of a written tree, by
// bus ID: links trained below their slot, speeds the kernel does not know, files missing.
func setLinks(t *testing.T, root string, links map[string]linkCap) {
	t.Helper()
	for id, l := range links {
		dir, err := filepath.EvalSymlinks(filepath.Join(root, pciDevices+id))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct{ name, value string }{{"max_link_speed", l.speed}, {"max_link_width", strconv.Itoa(l.width)}} {
			p := filepath.Join(dir, f.name)
			if l == (linkCap{}) {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, []byte(f.value+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// removeLinks removes every link file of a written tree, as on a node whose kernel has
// none (before Linux 4.13).
func removeLinks(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, "devices"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "max_link_") {
			err = os.Remove(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dgxH100 is the dgx-h100 profile, whose eight GPUs sit each behind the PCIe switch of a
// compute NIC (on a second downstream port), as on the real machine; it returns the GPUs'
// bus IDs in the order of the NICs.
func dgxH100(t *testing.T) (*mocknode.Node, []string) {
	t.Helper()
	n := profileNode(t, "dgx-h100")
	var gpus []string
	for _, g := range n.GPUs {
		gpus = append(gpus, g.Address)
	}
	return n, gpus
}

// profileNode returns the node of a mocknode profile.
func profileNode(t *testing.T, name string) *mocknode.Node {
	t.Helper()
	p, err := mocknode.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p.Node()
}

// ports returns the ports of n whose ibdev is in ibdevs, in inventory order; none means
// all.
func ports(n *mocknode.Node, ibdevs ...string) []discovery.Port {
	var out []discovery.Port
	for _, p := range n.ExpectedPorts() {
		if len(ibdevs) == 0 || slices.Contains(ibdevs, p.IBDev) {
			out = append(out, p)
		}
	}
	return out
}

// subset keeps of n the RDMA devices named, their functions (Data Direct functions, which
// share a VPD UUID with them, included) and netdevs, the GPUs on the PCIe roots of those
// functions, and the platform: a smaller tree that writes faster.
func subset(n *mocknode.Node, ibdevs ...string) *mocknode.Node {
	out := &mocknode.Node{NetnsMode: n.NetnsMode, KernelModules: n.KernelModules}
	fns := map[string]bool{}
	for _, d := range n.RDMADevices {
		if slices.Contains(ibdevs, d.Name) {
			out.RDMADevices = append(out.RDMADevices, d)
			fns[d.PCI] = true
		}
	}
	uuids := map[string]bool{}
	for _, f := range n.PCIFunctions {
		if fns[f.Address] && f.VPD != nil && f.VPD.UUID != "" {
			uuids[f.VPD.UUID] = true
		}
	}
	roots, bridges := map[string]bool{}, map[string]bool{}
	for _, f := range n.PCIFunctions {
		if fns[f.Address] || (f.VPD != nil && uuids[f.VPD.UUID]) {
			out.PCIFunctions = append(out.PCIFunctions, f)
			roots[f.Root] = true
			for _, b := range f.Bridges {
				bridges[b] = true
			}
		}
	}
	for _, g := range n.GPUs {
		if roots[g.Root] {
			out.GPUs = append(out.GPUs, g)
			for _, b := range g.Bridges {
				bridges[b] = true
			}
		}
	}
	for _, d := range n.Netdevs {
		if fns[d.PCI] {
			out.Netdevs = append(out.Netdevs, d)
		}
	}
	if n.Platform != nil {
		p := *n.Platform
		p.Bridges = slices.DeleteFunc(slices.Clone(p.Bridges), func(b mocknode.Bridge) bool { return !bridges[b.Address] })
		out.Platform = &p
	}
	return out
}

// softRoCEWithGPU is the soft-roce profile plus a GPU on the VM's root bus, whose NUMA
// node the VM does not say, as its network device's.
func softRoCEWithGPU(t *testing.T) *mocknode.Node {
	n := profileNode(t, "soft-roce")
	n.GPUs = append(n.GPUs, mocknode.GPU{Address: "0000:05:00.0", Root: "pci0000:00", Device: 0x2330, SubsystemDevice: 0x16c1, NUMANode: -1, Driver: "nvidia"})
	return n
}

func remove(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, root, rel, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(rel)), []byte(value+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
