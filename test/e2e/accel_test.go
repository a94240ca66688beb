package e2e

import (
	"context"
	"fmt"
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

// mockGPUNamespace is where the local cluster runs the mock GPU plugin.
const mockGPUNamespace = "mock-gpu"

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

// TestDataDirectPairing switches the node to the gb300 mock node, four ConnectX-8 ports
// whose DMA goes through a Data Direct function on their GPU's PCIe root while the port's
// own function sits on a CPU's root, and runs the 4 + 4 claim: the pairs are made on the
// Data Direct roots, which a pairing by the netdev's root could not do.
func TestDataDirectPairing(t *testing.T) {
	env.NeedMockNode(t)
	host := env.NeedHost(t, "switch the mock node to the gb300 profile")
	ctx := framework.Context(t, 10*time.Minute)
	useProfile(t, ctx, host, "gb300", "mlx5-3-p1", 4)
	t.Cleanup(func() {
		useProfile(t, framework.Context(t, 5*time.Minute), host, "default", "mlx5-9-p1", 8)
	})

	ns := env.NewNamespace(t, "datadirect")
	obj, err := claimgen.Build(claimgen.Options{
		Kind: claimgen.KindTemplate, Name: "pairs", Namespace: ns, GPUs: 4, NICs: 4, Align: claimgen.AlignPCIe,
		GPUClass: mockGPUClass, NICClass: classExclusive, GPUDirect: claimgen.GPUDirectDMABuf,
	})
	if err != nil {
		t.Fatal(err)
	}
	env.CreateClaimTemplate(t, ns, "pairs", obj.(*resourceapi.ResourceClaimTemplate).Spec.Spec)
	env.CreatePod(t, framework.ReportPod(ns, "train", "pairs"))
	r := env.WaitReport(t, ns, "train")
	devs, err := publishedAllocation(ctx, env.PodClaim(t, ns, "train"))
	if err != nil {
		t.Fatal(err)
	}
	var ibdevs []string
	for i := range 4 {
		gpu, nic := devs[claimgen.GPURequest(i)], devs[claimgen.NICRequest(i)]
		gr, nr := stringAttr(gpu, pcieRoot), stringAttr(nic, pcieRoot)
		netdevRoot := sliceAttr(nic, "netdev_pcie_root").StringValue
		dd := sliceAttr(nic, "data_direct").BoolValue
		switch {
		case gr == "" || gr != nr:
			t.Errorf("%s: pair %d: GPU %s on root %q, port %s on root %q", framework.DriverFault, i, gpu.Name, gr, nic.Name, nr)
		case dd == nil || !*dd || netdevRoot == nil || *netdevRoot == nr:
			t.Errorf("%s: port %s: data_direct %v, netdev root %v, published root %q: want the Data Direct root, apart from the netdev's",
				framework.DriverFault, nic.Name, dd, netdevRoot, nr)
		}
		ibdevs = append(ibdevs, *sliceAttr(nic, "ibdev").StringValue)
	}
	assertSees(t, "train", r, want{ibdevs: ibdevs})
	env.DeletePod(t, ns, "train")
}

// useProfile makes the node's mock node that of profile and restarts the RDMA and mock
// GPU plugins on it, then waits until the RDMA plugin publishes device and the mock GPU
// plugin gpus GPUs.
func useProfile(t *testing.T, ctx context.Context, host framework.Host, profile, device string, gpus int) {
	t.Helper()
	if err := host.UseMockProfile(ctx, profile); err != nil {
		t.Fatalf("mock node %s: %v", profile, err)
	}
	pod, err := env.PluginPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gpuPods, err := env.Client.CoreV1().Pods(mockGPUNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(gpuPods.Items, *pod) {
		if err := env.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("restart %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
	framework.Eventually(t, ctx, 3*time.Minute, time.Second, "plugins on mock node "+profile, func(ctx context.Context) error {
		if p, err := env.PluginPod(ctx); err != nil || p.UID == pod.UID {
			return fmt.Errorf("plugin pod not replaced yet (%v)", err)
		}
		if err := env.WaitRegistered(ctx); err != nil {
			return err
		}
		if _, err := env.SliceDevice(ctx, device); err != nil {
			return err
		}
		n, err := countDevices(ctx, mockGPUClass)
		if err == nil && n != gpus {
			err = fmt.Errorf("%d mock GPUs published, want %d", n, gpus)
		}
		return err
	})
}
