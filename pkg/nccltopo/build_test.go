package nccltopo

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
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
		name     string
		node     *mocknode.Node
		platform platform
		in       func(n *mocknode.Node) Input
		// want is the outline of the file (see outline).
		want        []string
		wantSkipped []Skipped
	}{
		{
			name: "one rail: a GPU and the NIC behind its switch",
			node: dgx, platform: defaultPlatform(),
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n, "mlx5_0"), GPUBusIDs: dgxGPUs[:1]}
			},
			want: []string{
				"numa0: 0000:15:01.0 0000:16:00.0 0000:17:00.0 0000:18:00.0 net=mlx5_0",
				"numa0: 0000:15:01.0 0000:16:00.0 0000:17:01.0 0000:19:00.0 gpu",
			},
		},
		{
			name: "two rails on two sockets, the GPUs given out of order",
			node: dgx, platform: defaultPlatform(),
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n, "mlx5_0", "mlx5_4"), GPUBusIDs: []string{dgxGPUs[4], dgxGPUs[0]}}
			},
			want: []string{
				"numa0: 0000:15:01.0 0000:16:00.0 0000:17:00.0 0000:18:00.0 net=mlx5_0",
				"numa0: 0000:15:01.0 0000:16:00.0 0000:17:01.0 0000:19:00.0 gpu",
				"numa1: 0000:97:01.0 0000:98:00.0 0000:99:00.0 0000:9a:00.0 net=mlx5_4",
				"numa1: 0000:97:01.0 0000:98:00.0 0000:99:01.0 0000:9b:00.0 gpu",
			},
		},
		{
			name: "two functions of one card share their root port",
			node: dgx, platform: defaultPlatform(),
			in: func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_9", "mlx5_8")} },
			want: []string{
				"numa1: 0000:a7:01.0 0000:a8:00.0 net=mlx5_8",
				"numa1: 0000:a7:01.0 0000:a8:00.1 net=mlx5_9",
			},
		},
		{
			name: "a dual-port device is one net",
			node: profileNode(t, "vpi-dual-port"), platform: defaultPlatform(),
			in:   func(n *mocknode.Node) Input { return Input{Ports: ports(n)} },
			want: []string{"numa0: 0000:00:03.0 0000:05:00.0 net=mlx4_0"},
		},
		{
			name: "Data Direct: the _dma net sits at the DMA function, next to the GPU",
			node: dataDirectNode(), platform: gracePlatform(),
			in: func(n *mocknode.Node) Input {
				p := ports(n)
				p[0].DataDirectBusID = "0008:04:00.0"
				p[0].GPUDirect = discovery.GPUDirectDMABuf
				return Input{Ports: p, GPUBusIDs: []string{"0008:03:00.0"}}
			},
			want: []string{
				"numa0: 0000:00:01.0 0000:01:00.0 net=mlx5_0",
				"numa0: 0008:00:00.0 0008:01:00.0 0008:02:00.0 0008:03:00.0 gpu",
				"numa0: 0008:00:00.0 0008:01:00.0 0008:02:01.0 0008:04:00.0 net=mlx5_0_dma",
			},
		},
		{
			name: "a virtual device is skipped, the GPU stays",
			node: softRoCEWithGPU(), platform: defaultPlatform(),
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n), GPUBusIDs: []string{"0000:05:00.0"}}
			},
			want:        []string{"numa0: 0000:05:00.0 gpu"},
			wantSkipped: []Skipped{{IBDev: "rxe0", Port: 1, Reason: ReasonVirtual}},
		},
	}
	// Trees are written once per node and read by several cases (Build only reads), each
	// through a new FS as the plugin would.
	roots := map[*mocknode.Node]string{}
	for _, tt := range tests {
		if _, ok := roots[tt.node]; !ok {
			_, roots[tt.node] = writeFixture(t, tt.node, tt.platform)
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
	p := defaultPlatform()
	// One card trained below its slot: the Gen4 root port caps the link of its switch.
	p.links = map[string]linkCap{"0000:d9:01.0": {gen4, 16}}
	fsys, _ := writeFixture(t, n, p)
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
	fsys, root := writeFixture(t, n, defaultPlatform())
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
	// GPU 0 sits at 0000:19:00.0 below the downstream port 0000:17:01.0.
	tests := []struct {
		name      string
		links     map[string]linkCap
		skipLinks bool
		wantSpeed string
		wantWidth string
	}{
		{name: "both gen5 x16", wantSpeed: gen5, wantWidth: "16"},
		{name: "port slower", links: map[string]linkCap{"0000:17:01.0": {gen4, 16}}, wantSpeed: gen4, wantWidth: "16"},
		{name: "device slower and narrower", links: map[string]linkCap{"0000:19:00.0": {gen4, 8}}, wantSpeed: gen4, wantWidth: "8"},
		{name: "port narrower", links: map[string]linkCap{"0000:17:01.0": {gen5, 4}}, wantSpeed: gen5, wantWidth: "4"},
		{name: "port unknown speed", links: map[string]linkCap{"0000:17:01.0": {"Unknown", 16}}, wantSpeed: gen5, wantWidth: "16"},
		{name: "device files missing", links: map[string]linkCap{"0000:19:00.0": {}}, wantSpeed: gen5, wantWidth: "16"},
		{name: "no files at all", skipLinks: true, wantSpeed: "", wantWidth: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaultPlatform()
			p.links, p.skipLinks = tt.links, tt.skipLinks
			fsys, _ := writeFixture(t, n, p)
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
			n := &mocknode.Node{PCIFunctions: []mocknode.PCIFunction{gpu("0000:05:00.0", "pci0000:00", nil, tt.numa)}}
			p := platform{modalias: tt.modalias, cpumaps: map[int]string{}}
			if tt.numa >= 0 {
				p.cpumaps[tt.numa] = tt.cpumap
			}
			fsys, _ := writeFixture(t, n, p)
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
		name     string
		node     *mocknode.Node
		platform platform
		// breakTree changes the written tree (paths relative to the sysfs root).
		breakTree func(t *testing.T, root string)
		in        func(n *mocknode.Node) Input
		wantIs    error
		want      []string // substrings of the error
	}{
		{
			name: "GPU not in sysfs", node: dgx, platform: defaultPlatform(),
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: []string{"0000:99:00.0"}} },
			want: []string{"GPU 0000:99:00.0", "bus/pci/devices/0000:99:00.0"},
		},
		{
			name: "malformed GPU bus ID", node: dgx, platform: defaultPlatform(),
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: []string{"0000:3B:00.0"}} },
			want: []string{"GPU 0000:3B:00.0", "malformed PCI bus ID"},
		},
		{
			name: "GPU listed twice", node: dgx, platform: defaultPlatform(),
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: []string{dgxGPUs[0], dgxGPUs[0]}} },
			want: []string{"GPU 0000:19:00.0", "listed twice"},
		},
		{
			name: "GPU bus ID is a NIC", node: dgx, platform: defaultPlatform(),
			in: func(n *mocknode.Node) Input {
				return Input{Ports: ports(n, "mlx5_0"), GPUBusIDs: []string{"0000:18:00.0"}}
			},
			want: []string{"port mlx5_0/1", "0000:18:00.0", "GPU 0000:18:00.0"},
		},
		{
			name: "GPU bus ID of a function that is no display controller", node: dgx, platform: defaultPlatform(),
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: []string{"0000:a8:00.0"}} },
			want: []string{"GPU 0000:a8:00.0", "class 0x020000", "0000:a8:00.0/class"},
		},
		{
			name: "malformed Data Direct bus ID", node: dgx, platform: defaultPlatform(),
			in: func(n *mocknode.Node) Input {
				p := ports(n, "mlx5_0")
				p[0].DataDirectBusID = "0000:18:00"
				return Input{Ports: p}
			},
			want: []string{"port mlx5_0/1 Data Direct", `"0000:18:00"`},
		},
		{
			name: "port without a bus ID that is not virtual", node: dgx, platform: defaultPlatform(),
			in: func(n *mocknode.Node) Input {
				p := ports(n, "mlx5_0")
				p[0].PCIBusID = ""
				return Input{Ports: p}
			},
			want: []string{"port mlx5_0/1", "no PCI bus ID"},
		},
		{
			name: "device name NCCL would misread", node: dgx, platform: defaultPlatform(),
			in: func(n *mocknode.Node) Input {
				p := ports(n, "mlx5_0")
				p[0].IBDev = `mlx5"0`
				return Input{Ports: p}
			},
			want: []string{`port mlx5"0/1`, "net name"},
		},
		{
			name: "bridge without a class file", node: dgx, platform: defaultPlatform(),
			breakTree: func(t *testing.T, root string) {
				remove(t, root, "devices/pci0000:15/0000:15:01.0/0000:16:00.0/class")
			},
			in:   func(*mocknode.Node) Input { return Input{GPUBusIDs: dgxGPUs[:1]} },
			want: []string{"GPU 0000:19:00.0", "devices/pci0000:15/0000:15:01.0/0000:16:00.0/class"},
		},
		{
			name: "garbled vendor file", node: dgx, platform: defaultPlatform(),
			breakTree: func(t *testing.T, root string) {
				write(t, root, "devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/vendor", "mellanox")
			},
			in:     func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			wantIs: sysfs.ErrSyntax,
			want:   []string{"port mlx5_0/1", "0000:18:00.0/vendor", `"mellanox"`},
		},
		{
			name: "garbled link width", node: dgx, platform: defaultPlatform(),
			breakTree: func(t *testing.T, root string) {
				write(t, root, "devices/pci0000:15/0000:15:01.0/max_link_width", "x16")
			},
			in:     func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			wantIs: sysfs.ErrSyntax,
			want:   []string{"port mlx5_0/1", "0000:15:01.0/max_link_width"},
		},
		{
			name: "link speed NCCL would misread", node: dgx, platform: defaultPlatform(),
			breakTree: func(t *testing.T, root string) {
				write(t, root, "devices/pci0000:15/0000:15:01.0/max_link_speed", `32.0 GT/s "PCIe"`)
			},
			in:     func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			wantIs: sysfs.ErrSyntax,
			want:   []string{"port mlx5_0/1", "0000:15:01.0/max_link_speed"},
		},
		{
			name: "no CPU modalias", node: dgx, platform: platform{cpumaps: defaultPlatform().cpumaps},
			in:   func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			want: []string{"CPU type", "devices/system/cpu/modalias"},
		},
		{
			name: "a CPU NCCL does not run on", node: dgx,
			platform: platform{modalias: "cpu:type:riscv64:feature:", cpumaps: defaultPlatform().cpumaps},
			in:       func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			wantIs:   sysfs.ErrSyntax,
			want:     []string{"devices/system/cpu/modalias", "riscv64"},
		},
		{
			name: "no cpumap of the NUMA node", node: dgx, platform: platform{modalias: modaliasSPR},
			in:   func(n *mocknode.Node) Input { return Input{Ports: ports(n, "mlx5_0")} },
			want: []string{"NUMA node 0", "devices/system/node/node0/cpumap"},
		},
		{
			name: "only virtual devices", node: softRoCEWithGPU(), platform: defaultPlatform(),
			in:     func(n *mocknode.Node) Input { return Input{Ports: ports(n)} },
			wantIs: ErrNothingToDescribe,
			want:   []string{"1 ports and 0 GPUs"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, root := writeFixture(t, tt.node, tt.platform)
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

// profileNode returns the node of a mocknode profile.
func profileNode(t *testing.T, name string) *mocknode.Node {
	t.Helper()
	p, err := mocknode.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p.Node()
}

// dataDirectNode is shaped like a GB300 tray's one rail: a ConnectX-8 whose network
// function hangs off the Grace CPU's root port, and whose Data Direct DMA function sits
// in another PCI domain below the PCIe switch that also holds the GPU.
func dataDirectNode() *mocknode.Node {
	const guid = 0x7c8c090300c3cf00
	nic := mocknode.PCIFunction{
		Address: "0000:01:00.0", Root: "pci0000:00", Bridges: []string{"0000:00:01.0"},
		Vendor: 0x15b3, Device: 0x1023, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0001, // ConnectX-8
		Class: 0x020700, Driver: "mlx5_core",
	}
	dd := mocknode.PCIFunction{
		Address: "0008:04:00.0", Root: "pci0008:00", Bridges: []string{"0008:00:00.0", "0008:01:00.0", "0008:02:01.0"},
		Vendor: 0x15b3, Device: deviceDataDirect, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0001,
		Class: classDataDirect, Driver: "mlx5_core",
	}
	return &mocknode.Node{
		PCIFunctions: []mocknode.PCIFunction{
			nic, dd,
			gpu("0008:03:00.0", "pci0008:00", []string{"0008:00:00.0", "0008:01:00.0", "0008:02:00.0"}, 0),
		},
		RDMADevices: []mocknode.RDMADevice{{
			Name: "mlx5_0", PCI: nic.Address, NodeGUID: mocknode.GUID(guid), SysImageGUID: mocknode.GUID(guid), FWVer: "40.45.1020",
			Ports: []mocknode.Port{{
				Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "800 Gb/sec (4X XDR)", LinkLayer: "InfiniBand", LID: 0x10, SMLID: 1,
				GIDs: []mocknode.GID{{Index: 0, GID: mocknode.LinkLocalGID(guid), Type: mocknode.GIDTypeRoCEv1}},
			}},
		}},
	}
}

// gracePlatform is an arm64 node with one NUMA node of 72 CPUs.
func gracePlatform() platform {
	return platform{
		modalias: "cpu:type:aarch64:feature:,0000,0001,0002",
		cpumaps:  map[int]string{0: "00000000,000000ff,ffffffff,ffffffff"},
	}
}

// softRoCEWithGPU is the soft-roce profile plus a GPU on the root bus, as in a VM.
func softRoCEWithGPU() *mocknode.Node {
	p, err := mocknode.Lookup("soft-roce")
	if err != nil {
		panic(err)
	}
	n := p.Node()
	n.PCIFunctions = append(n.PCIFunctions, gpu("0000:05:00.0", "pci0000:00", nil, 0))
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
