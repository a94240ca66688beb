package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

const (
	gpuDriver = "gpu.example.com"
	gpuPool   = testNode + "-gpu"
	// On the dgx-h100 mock, GPU 0 shares mlx5_0's PCIe switch; 0000:18:00.0 is mlx5_0
	// itself, a NIC and no GPU.
	gpu0BusID  = "0000:1b:00.0"
	mlx50BusID = "0000:18:00.0"
)

// publishGPUs publishes another driver's devices on the node, each with the given PCI
// address attribute ("" for none).
func (h *harness) publishGPUs(busIDs map[string]string) {
	h.t.Helper()
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: gpuDriver, NodeName: ptr.To(testNode),
			Pool: resourceapi.ResourcePool{Name: gpuPool, ResourceSliceCount: 1},
		},
	}
	for name, id := range busIDs {
		dev := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
		if id != "" {
			dev.Attributes[pciBusIDAttribute] = resourceapi.DeviceAttribute{StringValue: ptr.To(id)}
		}
		slice.Spec.Devices = append(slice.Spec.Devices, dev)
	}
	if _, err := h.kube.ResourceV1().ResourceSlices().Create(h.ctx, slice, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// topologyDriver is a driver that builds topology files into dir.
func (h *harness) topologyDriver(dir string, withBuilder bool) *Driver {
	h.t.Helper()
	opts := DriverOptions{
		DriverName: testDriver, NodeName: testNode, Kube: h.kube,
		Store:   checkpoint.NewStore(h.dataDir, h.bootPath),
		Specs:   cdi.NewWriter(cdi.Options{SpecDir: h.cdiDir, DevRoot: "/dev", TopologyDir: dir, Exists: func(string) bool { return true }}),
		Devices: h.pub, Clock: h.clock, CleanupGrace: -1,
	}
	if withBuilder {
		opts.Topology = &TopologySource{SysfsRoot: filepath.Join(mockNode(h.t, "dgx-h100"), mocknode.SysDir), Kube: h.kube, NodeName: testNode}
	}
	d, err := NewDriver(h.ctx, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// TestTopologyFile prepares claims that ask for an NCCL topology file: the file holds
// the claim's ports and the GPUs of the same claim (and only devices that are GPUs with
// a well-formed address), the spec mounts it and names it in NCCL_TOPO_FILE, and
// unprepare removes it.
func TestTopologyFile(t *testing.T) {
	const wants = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","fabric":{"topologyFile":true}}`
	tests := []struct {
		name string
		// gpus are the other driver's devices allocated with mlx5_0, by name, with
		// the PCI address each publishes.
		gpus        map[string]string
		builder     bool
		wantErr     string
		wantIn      []string
		wantMissing []string
	}{{
		name:    "a port and its GPU",
		gpus:    map[string]string{"gpu-0": gpu0BusID},
		builder: true,
		wantIn:  []string{`name="mlx5_0"`, `busid="` + gpu0BusID + `"`},
	}, {
		name:    "the port alone",
		builder: true,
		wantIn:  []string{`name="mlx5_0"`},
	}, {
		name:        "another driver's device that is no GPU, or has no or a bad address, is left out",
		gpus:        map[string]string{"nic": mlx50BusID, "plain": "", "evil": "../../../etc/passwd"},
		builder:     true,
		wantIn:      []string{`name="mlx5_0"`},
		wantMissing: []string{"passwd", `class="0x030200"`},
	}, {
		name:    "a plugin without a builder refuses the claim",
		builder: false,
		wantErr: "cannot build one",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			dir := t.TempDir()
			d := h.topologyDriver(dir, tc.builder)
			if len(tc.gpus) > 0 {
				h.publishGPUs(tc.gpus)
			}
			claim := h.claim("topo", []alloc{{request: "nic", device: devicemodel.DeviceName("mlx5_0", 1)}},
				opaque(resourceapi.AllocationConfigSourceClaim, wants, "nic"))
			for name := range tc.gpus {
				claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
					resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuDriver, Pool: gpuPool, Device: name})
			}
			res := prepareOne(t, d, claim)
			file := cdi.TopologyFile(dir, string(claim.UID))
			if tc.wantErr != "" {
				if res.Err == nil || !strings.Contains(res.Err.Error(), tc.wantErr) {
					t.Fatalf("prepare error %v, want one with %q", res.Err, tc.wantErr)
				}
				if _, err := os.Stat(file); !os.IsNotExist(err) {
					t.Errorf("a refused claim left its topology file: %v", err)
				}
				if got := files(t, h.cdiDir); len(got) != 0 {
					t.Errorf("a refused claim left CDI files %v", got)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("prepare: %v", res.Err)
			}
			xml, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("topology file: %v", err)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(string(xml), w) {
					t.Errorf("topology file lacks %s:\n%s", w, xml)
				}
			}
			for _, w := range tc.wantMissing {
				if strings.Contains(string(xml), w) {
					t.Errorf("topology file has %s:\n%s", w, xml)
				}
			}
			spec, err := os.ReadFile(filepath.Join(h.cdiDir, cdi.SpecFileName(testDriver, string(claim.UID))))
			if err != nil {
				t.Fatal(err)
			}
			inPod := cdi.TopologyContainerPath(string(claim.UID))
			for _, w := range []string{`"NCCL_TOPO_FILE=` + inPod + `"`, `"hostPath": "` + file + `"`, `"containerPath": "` + inPod + `"`} {
				if !strings.Contains(string(spec), w) {
					t.Errorf("CDI spec lacks %s:\n%s", w, spec)
				}
			}
			unprepareOne(t, d, claim)
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("unprepare left the topology file: %v", err)
			}
		})
	}
}
