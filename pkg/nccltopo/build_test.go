package nccltopo

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// build runs Build and checks every file it returns against NCCL's schema and reader.
func build(t *testing.T, fsys *sysfs.FS, in Input) (Result, *xSystem, error) {
	t.Helper()
	res, err := Build(fsys, in)
	if err != nil {
		return res, nil, err
	}
	if err := checkLexical(res.XML); err != nil {
		t.Fatalf("NCCL's reader would refuse the file: %v\n%s", err, res.XML)
	}
	s, err := parseSchema(res.XML)
	if err != nil {
		t.Fatalf("file does not match NCCL's schema: %v\n%s", err, res.XML)
	}
	checkPolicy(t, s)
	return res, s, nil
}

// checkPolicy checks what the file leaves to NCCL (doc.go): no gpu element, nets with a
// name only, nics only below a pci.
func checkPolicy(t *testing.T, s *xSystem) {
	t.Helper()
	var walk func(p xPCI)
	walk = func(p xPCI) {
		if len(p.GPUs) > 0 {
			t.Errorf("pci %s: gpu element written; NCCL fills it from NVML", deref(p.BusID))
		}
		for _, n := range p.NICs {
			for _, net := range n.Nets {
				if !reflect.DeepEqual(net, xNet{Name: net.Name, rest: rest{Text: net.Text}}) {
					t.Errorf("net %s: attributes besides name; NCCL's detection would be overridden", deref(net.Name))
				}
			}
		}
		for _, c := range p.PCIs {
			walk(c)
		}
	}
	for _, c := range s.CPUs {
		if len(c.NICs) > 0 {
			t.Errorf("cpu %s: nic directly below a cpu", deref(c.NUMAID))
		}
		for _, p := range c.PCIs {
			walk(p)
		}
	}
}

func TestBuild(t *testing.T) {
	dgx, dgxGPUs := dgxH100(t)
	tests := []struct {
		name string
		node *mocknode.Node
		in   func(n *mocknode.Node) Input
		// want is the outline of the file (see outline).
		want        []string
		wantSkipped []Skipped
	}{
		{
			name: "one rail: a GPU and the NIC behind its switch",
			node: dgx,
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n, "mlx5_0"), GPUBusIDs: dgxGPUs[:1]}
			},
			want: []string{
				"numa0: 0000:15:01.0 0000:16:00.0 0000:17:00.0 0000:18:00.0 net=mlx5_0",
				"numa0: 0000:15:01.0 0000:16:00.0 0000:17:01.0 0000:1b:00.0 gpu",
			},
		},
		{
			name: "two rails on two sockets, the GPUs given out of order",
			node: dgx,
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n, "mlx5_0", "mlx5_4"), GPUBusIDs: []string{dgxGPUs[4], dgxGPUs[0]}}
			},
			want: []string{
				"numa0: 0000:15:01.0 0000:16:00.0 0000:17:00.0 0000:18:00.0 net=mlx5_0",
				"numa0: 0000:15:01.0 0000:16:00.0 0000:17:01.0 0000:1b:00.0 gpu",
				"numa1: 0000:97:01.0 0000:98:00.0 0000:99:00.0 0000:9a:00.0 net=mlx5_4",
				"numa1: 0000:97:01.0 0000:98:00.0 0000:99:01.0 0000:9d:00.0 gpu",
			},
		},
		{
			name: "two functions of one card share their root port",
			node: dgx,
			in:   func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_9", "mlx5_8")} },
			want: []string{
				"numa1: 0000:a7:01.0 0000:a8:00.0 net=mlx5_8",
				"numa1: 0000:a7:01.0 0000:a8:00.1 net=mlx5_9",
			},
		},
		{
			name: "a dual-port device is one net",
			node: profileNode(t, "vpi-dual-port"),
			in:   func(n *mocknode.Node) Input { return Input{Ports: ports(n)} },
			want: []string{"numa0: 0000:00:03.0 0000:05:00.0 net=mlx4_0"},
		},
		{
			// One rail of a GB300 tray: the ConnectX-8's network function below the Grace
			// CPU's root port, its Data Direct function in another PCI domain, below its
			// own switch that also leads to the GPU.
			name: "Data Direct: the _dma net sits at the DMA function, next to the GPU",
			node: subset(profileNode(t, "gb300"), "mlx5_0"),
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n), GPUBusIDs: []string{n.GPUs[0].Address}}
			},
			want: []string{
				"numa0: 0000:00:01.0 0000:01:00.0 0000:02:00.0 0000:03:00.0 net=mlx5_0",
				"numa0: 0009:00:00.0 0009:01:00.0 0009:02:00.0 0009:03:00.0 net=mlx5_0_dma",
				"numa0: 0009:00:00.0 0009:01:00.0 0009:02:01.0 0009:04:00.0 0009:05:00.0 0009:06:00.0 gpu",
			},
		},
		{
			name: "a virtual device is skipped, the GPU stays",
			node: softRoCEWithGPU(t),
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n), GPUBusIDs: []string{"0000:05:00.0"}}
			},
			want:        []string{"numa-1: 0000:05:00.0 gpu"},
			wantSkipped: []Skipped{{IBDev: "rxe0", Port: 1, Reason: ReasonVirtual}},
		},
	}
	// Trees are written once per node and read by several cases (Build only reads), each
	// through a new FS as the plugin would.
	roots := map[*mocknode.Node]string{}
	for _, tt := range tests {
		if _, ok := roots[tt.node]; !ok {
			_, roots[tt.node] = writeFixture(t, tt.node)
		}
		t.Run(tt.name, func(t *testing.T) {
			fsys, err := sysfs.Open(roots[tt.node])
			if err != nil {
				t.Fatal(err)
			}
			res, s, err := build(t, fsys, tt.in(tt.node))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outline(s)); diff != "" {
				t.Errorf("outline (-want +got):\n%s\n%s", diff, res.XML)
			}
			if diff := cmp.Diff(tt.wantSkipped, res.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildGolden compares the file of a whole DGX H100 (eight GPUs, ten ports) with
// testdata/dgx-h100.xml; go test -update rewrites it.
func TestBuildGolden(t *testing.T) {
	n, gpus := dgxH100(t)
	fsys, root := writeFixture(t, n)
	// One card trained below its slot: the Gen4 root port caps the link of its switch.
	setLinks(t, root, map[string]linkCap{"0000:d9:01.0": {gen4, 16}})
	res, _, err := build(t, fsys, Input{Ports: ports(n), GPUBusIDs: gpus})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "dgx-h100.xml")
	if *update {
		if err := os.WriteFile(golden, res.XML, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(res.XML)); diff != "" {
		t.Errorf("file differs from %s (-want +got), go test -update rewrites it:\n%s", golden, diff)
	}
	// The golden file itself must pass the checks, whoever edits it.
	if err := checkLexical(want); err != nil {
		t.Errorf("%s: %v", golden, err)
	}
	if _, err := parseSchema(want); err != nil {
		t.Errorf("%s: %v", golden, err)
	}
}

// TestBuildDeterministic builds the same claim from inputs in different orders.
func TestBuildDeterministic(t *testing.T) {
	n, gpus := dgxH100(t)
	fsys, root := writeFixture(t, n)
	first, _, err := build(t, fsys, Input{Ports: ports(n), GPUBusIDs: gpus})
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(gpus)
	slices.Reverse(reversed)
	fresh, err := sysfs.Open(root) // a new FS: nothing cached from the first build
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := build(t, fresh, Input{Ports: ports(n), GPUBusIDs: reversed})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.XML, second.XML) {
		t.Errorf("files differ:\n%s\n---\n%s", first.XML, second.XML)
	}
}

// TestBuildLinks checks the link rule: the slower and narrower of a function and the port
// above it, missing files left out.
func TestBuildLinks(t *testing.T) {
	dgx, gpus := dgxH100(t)
	n := subset(dgx, "mlx5_0")
	// GPU 0 sits at 0000:1b:00.0 below the downstream port 0000:17:01.0.
	tests := []struct {
		name      string
		links     map[string]linkCap
		skipLinks bool
		wantSpeed string
		wantWidth string
	}{
		{name: "both gen5 x16", wantSpeed: gen5, wantWidth: "16"},
		{name: "port slower", links: map[string]linkCap{"0000:17:01.0": {gen4, 16}}, wantSpeed: gen4, wantWidth: "16"},
		{name: "device slower and narrower", links: map[string]linkCap{"0000:1b:00.0": {gen4, 8}}, wantSpeed: gen4, wantWidth: "8"},
		{name: "port narrower", links: map[string]linkCap{"0000:17:01.0": {gen5, 4}}, wantSpeed: gen5, wantWidth: "4"},
		{name: "port unknown speed", links: map[string]linkCap{"0000:17:01.0": {"Unknown", 16}}, wantSpeed: gen5, wantWidth: "16"},
		{name: "device files missing", links: map[string]linkCap{"0000:1b:00.0": {}}, wantSpeed: gen5, wantWidth: "16"},
		{name: "no files at all", skipLinks: true, wantSpeed: "", wantWidth: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, root := writeFixture(t, n)
			setLinks(t, root, tt.links)
			if tt.skipLinks {
				removeLinks(t, root)
			}
			_, s, err := build(t, fsys, Input{GPUBusIDs: gpus[:1]})
			if err != nil {
				t.Fatal(err)
			}
			g := s.CPUs[0].PCIs[0].PCIs[0].PCIs[0].PCIs[0]
			if deref(g.BusID) != gpus[0] {
				t.Fatalf("found %s where the GPU should be", deref(g.BusID))
			}
			if got := deref(g.LinkSpeed); got != tt.wantSpeed {
				t.Errorf("link_speed = %q, want %q", got, tt.wantSpeed)
			}
			if got := deref(g.LinkWidth); got != tt.wantWidth {
				t.Errorf("link_width = %q, want %q", got, tt.wantWidth)
			}
		})
	}
}

// TestBuildCPU checks the cpu elements: x86 and arm64, unknown NUMA nodes, long masks.
func TestBuildCPU(t *testing.T) {
	tests := []struct {
		name     string
		modalias string
		cpumap   string
		numa     int
		want     []string // the cpu element's attributes, key=value
	}{
		{
			name: "intel", modalias: modaliasSPR, cpumap: "00000000,0000ffff", numa: 0,
			want: []string{"numaid=0", "affinity=0000ffff", "arch=x86_64", "vendor=GenuineIntel", "familyid=6", "modelid=143"},
		},
		{
			name: "amd", modalias: "cpu:type:x86,ven0002fam0019mod0011:feature:,0000", cpumap: "ffffffff", numa: 0,
			want: []string{"numaid=0", "affinity=ffffffff", "arch=x86_64", "vendor=AuthenticAMD", "familyid=25", "modelid=17"},
		},
		{
			name: "grace", modalias: "cpu:type:aarch64:feature:,0000,0001", cpumap: "00000000,ffffffff", numa: 0,
			want: []string{"numaid=0", "affinity=ffffffff", "arch=arm64"},
		},
		{
			name: "unknown NUMA node: no affinity", modalias: modaliasSPR, numa: -1,
			want: []string{"numaid=-1", "arch=x86_64", "vendor=GenuineIntel", "familyid=6", "modelid=143"},
		},
		{
			name: "a mask longer than NCCL reads is left out", modalias: modaliasSPR,
			cpumap: strings.Repeat("ffffffff,", 31) + "ffffffff", numa: 0,
			want: []string{"numaid=0", "arch=x86_64", "vendor=GenuineIntel", "familyid=6", "modelid=143"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A GPU on the root bus of a two-socket machine, whose CPU files say what
			// the case says.
			n := &mocknode.Node{
				GPUs:     []mocknode.GPU{{Address: "0000:05:00.0", Root: "pci0000:00", Device: 0x2330, NUMANode: tt.numa, Driver: "nvidia"}},
				Platform: profileNode(t, "dgx-h100").Platform,
			}
			fsys, root := writeFixture(t, n)
			write(t, root, modaliasFile, tt.modalias)
			if tt.numa >= 0 {
				write(t, root, fmt.Sprintf(nodeCPUMap, tt.numa), tt.cpumap)
			}
			res, _, err := build(t, fsys, Input{GPUBusIDs: []string{"0000:05:00.0"}})
			if err != nil {
				t.Fatal(err)
			}
			first := strings.SplitN(string(res.XML), "\n", 3)[1]
			var got []string
			for _, m := range attrPairRE.FindAllStringSubmatch(first, -1) {
				got = append(got, m[1]+"="+m[2])
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cpu attributes (-want +got):\n%s\n%s", diff, res.XML)
			}
		})
	}
}

// TestBuildErrors checks that bad input fails with an error that names the device and
// the file.
func TestBuildErrors(t *testing.T) {
	full, dgxGPUs := dgxH100(t)
	dgx := subset(full, "mlx5_0", "mlx5_8")
	tests := []struct {
		name string
		node *mocknode.Node
		// breakTree changes the written tree (paths relative to the sysfs root).
		breakTree func(t *testing.T, root string)
		in        func(n *mocknode.Node) Input
		wantIs    error
		want      []string // substrings of the error
	}{
		{
			name: "GPU not in sysfs", node: dgx,
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: []string{"0000:99:00.0"}} },
			want: []string{"GPU 0000:99:00.0", "bus/pci/devices/0000:99:00.0"},
		},
		{
			name: "malformed GPU bus ID", node: dgx,
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: []string{"0000:3B:00.0"}} },
			want: []string{"GPU 0000:3B:00.0", "malformed PCI bus ID"},
		},
		{
			name: "GPU listed twice", node: dgx,
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: []string{dgxGPUs[0], dgxGPUs[0]}} },
			want: []string{"GPU 0000:1b:00.0", "listed twice"},
		},
		{
			name: "GPU bus ID is a NIC", node: dgx,
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n, "mlx5_0"), GPUBusIDs: []string{"0000:18:00.0"}}
			},
			want: []string{"port mlx5_0/1", "0000:18:00.0", "GPU 0000:18:00.0"},
		},
		{
			name: "GPU bus ID of a function that is no display controller", node: dgx,
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: []string{"0000:a8:00.0"}} },
			want: []string{"GPU 0000:a8:00.0", "class 0x020000", "0000:a8:00.0/class"},
		},
		{
			name: "malformed Data Direct bus ID", node: dgx,
			in: func(n *mocknode.Node) Input {
				p := ports(n, "mlx5_0")
				p[0].DataDirectBusID = "0000:18:00"
				return Input{Ports: p}
			},
			want: []string{"port mlx5_0/1 Data Direct", `"0000:18:00"`},
		},
		{
			name: "port without a bus ID that is not virtual", node: dgx,
			in: func(n *mocknode.Node) Input {
				p := ports(n, "mlx5_0")
				p[0].PCIBusID = ""
				return Input{Ports: p}
			},
			want: []string{"port mlx5_0/1", "no PCI bus ID"},
		},
		{
			name: "device name NCCL would misread", node: dgx,
			in: func(n *mocknode.Node) Input {
				p := ports(n, "mlx5_0")
				p[0].IBDev = `mlx5"0`
				return Input{Ports: p}
			},
			want: []string{`port mlx5"0/1`, "net name"},
		},
		{
			name: "bridge without a class file", node: dgx,
			breakTree: func(t *testing.T, root string) {
				remove(t, root, "devices/pci0000:15/0000:15:01.0/0000:16:00.0/class")
			},
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: dgxGPUs[:1]} },
			want: []string{"GPU 0000:1b:00.0", "devices/pci0000:15/0000:15:01.0/0000:16:00.0/class"},
		},
		{
			name: "garbled vendor file", node: dgx,
			breakTree: func(t *testing.T, root string) {
				write(t, root, "devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/vendor", "mellanox")
			},
			in:     func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			wantIs: sysfs.ErrSyntax,
			want:   []string{"port mlx5_0/1", "0000:18:00.0/vendor", `"mellanox"`},
		},
		{
			name: "garbled link width", node: dgx,
			breakTree: func(t *testing.T, root string) {
				write(t, root, "devices/pci0000:15/0000:15:01.0/max_link_width", "x16")
			},
			in:     func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			wantIs: sysfs.ErrSyntax,
			want:   []string{"port mlx5_0/1", "0000:15:01.0/max_link_width"},
		},
		{
			name: "link speed NCCL would misread", node: dgx,
			breakTree: func(t *testing.T, root string) {
				write(t, root, "devices/pci0000:15/0000:15:01.0/max_link_speed", `32.0 GT/s "PCIe"`)
			},
			in:     func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			wantIs: sysfs.ErrSyntax,
			want:   []string{"port mlx5_0/1", "0000:15:01.0/max_link_speed"},
		},
		{
			name: "no CPU modalias", node: dgx,
			breakTree: func(t *testing.T, root string) { remove(t, root, modaliasFile) },
			in:        func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			want:      []string{"CPU type", "devices/system/cpu/modalias"},
		},
		{
			name: "a CPU NCCL does not run on", node: dgx,
			breakTree: func(t *testing.T, root string) { write(t, root, modaliasFile, "cpu:type:riscv64:feature:") },
			in:        func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			wantIs:    sysfs.ErrSyntax,
			want:      []string{"devices/system/cpu/modalias", "riscv64"},
		},
		{
			name: "no cpumap of the NUMA node", node: dgx,
			breakTree: func(t *testing.T, root string) { remove(t, root, fmt.Sprintf(nodeCPUMap, 0)) },
			in:        func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			want:      []string{"NUMA node 0", "devices/system/node/node0/cpumap"},
		},
		{
			name: "only virtual devices", node: softRoCEWithGPU(t),
			in:     func(n *mocknode.Node) Input { return Input{Ports: ports(n)} },
			wantIs: ErrNothingToDescribe,
			want:   []string{"1 ports and 0 GPUs"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, root := writeFixture(t, tt.node)
			if tt.breakTree != nil {
				tt.breakTree(t, root)
			}
			res, err := Build(fsys, tt.in(tt.node))
			if err == nil {
				t.Fatalf("no error; file:\n%s", res.XML)
			}
			t.Logf("error: %v", err)
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q is not %v", err, tt.wantIs)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if res.XML != nil {
				t.Errorf("a file came with the error:\n%s", res.XML)
			}
		})
	}
}
