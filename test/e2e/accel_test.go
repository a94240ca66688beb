package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/claimgen"
	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// mockGPUClass is the DeviceClass of the local cluster's mock GPU driver
// (docs/local-cluster.md, "Mock GPUs").
const mockGPUClass = "gpu.mock.rdma.dra.io"

// pcieRoot is the standard attribute both drivers publish.
const pcieRoot resourceapi.QualifiedName = "resource.kubernetes.io/pcieRoot"

// TestGPUNICPairs runs the copyable 8 + 8 claim (rdma-dra claim --gpus 8 --align pcie
// --distinct-rails) with the local cluster's mock GPUs: every GPU gets the whole port
// below its PCIe root, the eight pairs sit on eight roots and eight rails, the pod sees
// all of them, and no other pod gets a rail while it runs.
func TestGPUNICPairs(t *testing.T) {
	env.NeedMockNode(t)
	ctx := framework.Context(t, 5*time.Minute)
	framework.Eventually(t, ctx, 2*time.Minute, time.Second, "mock GPUs published", func(ctx context.Context) error {
		n, err := countDevices(ctx, mockGPUClass)
		if err == nil && n < 8 {
			err = fmt.Errorf("%d mock GPUs published, want 8 (make cluster-install installs them)", n)
		}
		return err
	})
	ns := env.NewNamespace(t, "pairs")
	obj, err := claimgen.Build(claimgen.Options{
		Kind: claimgen.KindTemplate, Name: "pairs", Namespace: ns, GPUs: 8, NICs: 8, Align: claimgen.AlignPCIe,
		GPUClass: mockGPUClass, NICClass: classExclusive, DistinctRails: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	env.CreateClaimTemplate(t, ns, "pairs", obj.(*resourceapi.ResourceClaimTemplate).Spec.Spec)
	env.CreatePod(t, framework.ReportPod(ns, "train", "pairs"))
	r := env.WaitReport(t, ns, "train")

	claim := env.PodClaim(t, ns, "train")
	devs, err := publishedAllocation(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	roots, rails := map[string]bool{}, map[int64]bool{}
	var ibdevs []string
	for i := range 8 {
		gpu, nic := devs[claimgen.GPURequest(i)], devs[claimgen.NICRequest(i)]
		gr, nr := stringAttr(gpu, pcieRoot), stringAttr(nic, pcieRoot)
		if gr == "" || gr != nr {
			t.Errorf("%s: pair %d: GPU %s on root %q, port %s on root %q", framework.DriverFault, i, gpu.Name, gr, nic.Name, nr)
		}
		roots[gr] = true
		if rail := sliceAttr(nic, "rail").IntValue; rail != nil {
			rails[*rail] = true
		}
		ibdevs = append(ibdevs, *sliceAttr(nic, "ibdev").StringValue)
	}
	if len(roots) != 8 || len(rails) != 8 {
		t.Errorf("%s: the pairs sit on %d PCIe roots and %d rails, want 8 and 8", framework.DriverFault, len(roots), len(rails))
	}
	slices.Sort(ibdevs)
	assertSees(t, "train", r, want{ibdevs: ibdevs})
	if ids := strings.Split(r.Env["MOCK_GPU_BUS_IDS"], ","); len(ids) != 8 {
		t.Errorf("the pod sees GPUs %q, want 8\n%s", r.Env["MOCK_GPU_BUS_IDS"], r.Raw)
	}

	// Every rail is taken: a port with its GPU waits.
	one, err := claimgen.Build(claimgen.Options{
		Kind: claimgen.KindTemplate, Name: "one", Namespace: ns, GPUs: 1, NICs: 1, Align: claimgen.AlignPCIe,
		GPUClass: mockGPUClass, NICClass: classExclusive,
	})
	if err != nil {
		t.Fatal(err)
	}
	env.CreateClaimTemplate(t, ns, "one", one.(*resourceapi.ResourceClaimTemplate).Spec.Spec)
	env.CreatePod(t, framework.ReportPod(ns, "late", "one"))
	env.StaysPending(t, ns, "late", 10*time.Second)
	env.DeletePod(t, ns, "train")
	env.WaitReport(t, ns, "late")
}

// countDevices counts the devices on the node that a DeviceClass's driver publishes
// under the class's own name (the mock GPU driver's name is its class's).
func countDevices(ctx context.Context, driver string) (int, error) {
	list, err := env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + driver + ",spec.nodeName=" + env.Node,
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list.Items {
		n += len(s.Spec.Devices)
	}
	return n, nil
}

// publishedAllocation returns the published device of each request of an allocated claim,
// whichever driver published it.
func publishedAllocation(ctx context.Context, claim *resourceapi.ResourceClaim) (map[string]resourceapi.Device, error) {
	list, err := env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + env.Node})
	if err != nil {
		return nil, err
	}
	out := map[string]resourceapi.Device{}
	for _, res := range claim.Status.Allocation.Devices.Results {
		for _, s := range list.Items {
			if s.Spec.Driver != res.Driver || s.Spec.Pool.Name != res.Pool {
				continue
			}
			for _, d := range s.Spec.Devices {
				if d.Name == res.Device {
					out[res.Request] = d
				}
			}
		}
		if _, ok := out[res.Request]; !ok {
			return nil, fmt.Errorf("request %s: device %s/%s/%s is not published", res.Request, res.Driver, res.Pool, res.Device)
		}
	}
	return out, nil
}

// stringAttr returns a string attribute by its full name, "" when absent.
func stringAttr(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}
