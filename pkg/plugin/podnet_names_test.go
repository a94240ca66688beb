package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// TestTwoInstallationsAttachIntoOnePod attaches a claim of the standard installation and
// one of a second installation (another driver name, its own data directory) into the
// same pod: the default names must not collide in the pod's network namespace.
func TestTwoInstallationsAttachIntoOnePod(t *testing.T) {
	ns := &podNamespaces{names: map[string]bool{}}
	h1, h2 := newHarness(t, "dgx-h100"), newHarness(t, "dgx-h100")
	const other = "rdma-b.example.com"
	installs := []struct {
		h      *harness
		driver string
		device string
	}{
		{h1, testDriver, "mlx5-8-p1-shared"},
		{h2, other, "mlx5-9-p1-shared"},
	}
	var names []string
	for i, in := range installs {
		f := newFakeAttacher()
		d := in.h.networkDriverNamed(namespaceAttacher{f, ns}, in.driver)
		claim := in.h.driverClaim(in.driver, fmt.Sprintf("c%d", i), in.device, macvlanNode)
		claim = in.h.reservedFor(claim, "pod-a")
		if res := prepareOne(t, d, claim); res.Err != nil {
			t.Fatalf("prepare with %s: %v", in.driver, res.Err)
		}
		if err := d.net.AttachPod(in.h.ctx, "pod-a", "ns/pod-a", "/var/run/netns/cni-a"); err != nil {
			t.Fatalf("attach with %s: %v", in.driver, err)
		}
		for _, c := range f.callList() {
			names = append(names, strings.TrimPrefix(c, "attach pod-a "))
		}
	}
	if len(names) != 2 || names[0] != "rdma0" || names[1] == "rdma0" {
		t.Errorf("interfaces in the pod %v, want rdma0 for the standard installation and another name for the second", names)
	}
}

// podNamespaces are the interface names in the pods' network namespaces, shared by the
// attachers of two installations on one node.
type podNamespaces struct {
	mu    sync.Mutex
	names map[string]bool // pod/name
}

// namespaceAttacher refuses, like the real attacher, a name that the pod has already.
type namespaceAttacher struct {
	*fakeAttacher
	ns *podNamespaces
}

func (a namespaceAttacher) Attach(ctx context.Context, spec netattach.Spec, target netattach.Target, save netattach.Journal) (netattach.State, error) {
	key := target.PodUID + "/" + spec.PodIfName
	a.ns.mu.Lock()
	taken := a.ns.names[key]
	a.ns.names[key] = true
	a.ns.mu.Unlock()
	if taken {
		return netattach.State{}, fmt.Errorf("attach %s: %w: %s", spec.HostNetdev, netattach.ErrNameTaken, spec.PodIfName)
	}
	return a.fakeAttacher.Attach(ctx, spec, target, save)
}

// networkDriverNamed is networkDriver for an installation with the driver name driver,
// attaching through a, and without a second driver for its CDI writer (whose status
// writer would never stop, which a synctest bubble does not allow).
func (h *harness) networkDriverNamed(a podnet.Attacher, driver string) *Driver {
	h.t.Helper()
	pools, err := nodeconfig.Parse([]byte(`
network:
  addressPools:
  - name: storage
    selector: {linkTypes: [Ethernet]}
    subnet: 192.168.77.0/24
`))
	if err != nil {
		h.t.Fatal(err)
	}
	specs := cdi.NewWriter(cdi.Options{DriverName: driver, SpecDir: h.cdiDir, DevRoot: "/dev", HookPath: testHookPath, Exists: func(string) bool { return true }})
	return h.startNetworkDriver(driver, specs, &NetworkOptions{Attacher: a, Pools: &pools, Socket: "/run/nri/nri.sock"})
}

// driverClaim creates a claim with one device allocated by driver and a class config
// of driver's with the parameters params.
func (h *harness) driverClaim(driver, name, device, params string) *resourceapi.ResourceClaim {
	h.t.Helper()
	share := types.UID(fmt.Sprintf("%08x-1111-4111-8111-111111111111", len(name)))
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uidFor(driver + "/" + name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "rdma", Driver: driver, Pool: testPool, Device: device, ShareID: &share}},
				Config: []resourceapi.DeviceAllocationConfiguration{{
					Source: resourceapi.AllocationConfigSourceClass,
					DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
						Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)},
					}},
				}},
			},
		}},
	}
	created, err := h.kube.ResourceV1().ResourceClaims(c.Namespace).Create(h.ctx, c, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return created
}
