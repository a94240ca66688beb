package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// The tenant boundary (docs/security.md): on the chart's default classes a tenant's
// claim gets no network attachment, no address, no route and no umad or issm, whatever
// its config asks; the webhook refuses such a claim when it is written and, without the
// webhook, the plugin at prepare; what already runs is not disturbed; and the same
// claims run under a pool whose admin grants them, within its limits.

// refusedClaim is one claim a tenant may not have on the default classes.
type refusedClaim struct {
	name, class, port string
	// config is the claim's RdmaConfig fields, as JSON without apiVersion and kind.
	config string
	// want is the message's part that names the field and the limit.
	want string
	// classFree marks a field no claim may set on any class: its message names no class.
	classFree bool
}

// refusedClaims are the claims of the security review, on the chart's default classes;
// hostAddr is the host's address on the RoCE port's netdev. Each claim has a port of its
// own (the suite's node has 2 shares per port, one of mlx5_8 held by the bystander): a
// claim refused at prepare keeps its allocation, and a second one on its port could not
// be allocated, so it would never reach the plugin.
func refusedClaims(hostAddr netip.Prefix) []refusedClaim {
	return []refusedClaim{
		{name: "macvlan-host-address", class: classShared, port: rocePortA, config: fmt.Sprintf(`{"network":{"mode":"macvlan","addresses":[%q]}}`, hostAddr), want: `network.mode: Forbidden: "macvlan" is not allowed: the DeviceClass configures no network attachment`},
		{name: "move", class: classExclusive, port: rocePortB, config: `{"network":{"mode":"move"}}`, want: `network.mode: Forbidden: "move" is not allowed: the DeviceClass configures no network attachment`},
		{name: "static-address", class: classShared, port: "mlx5_1", config: `{"network":{"addresses":["192.168.99.5/24"]}}`, want: `network.addresses[0]: Forbidden: static addresses are not allowed`},
		{name: "routes", class: classShared, port: "mlx5_2", config: `{"network":{"routes":[{"destination":"10.0.0.0/8"}]}}`, want: `network.routes[0]: Forbidden: routes are not allowed`},
		{name: "address-pool", class: classShared, port: "mlx5_4", config: `{"network":{"ipam":"node"}}`, want: `network.ipam: Forbidden: node is not allowed`},
		{name: "keep-host-address", class: classExclusive, port: "mlx5_5", config: `{"network":{"keepHostAddress":true}}`, want: `network.keepHostAddress: Forbidden: moves the node's own addresses into the pod`, classFree: true},
		{name: "management", class: classExclusive, port: "mlx5_3", config: `{"charDevices":"management"}`, want: `charDevices: Forbidden: "management" exceeds the DeviceClass's allowedCharDevices "verbs"`},
		{name: "diagnostics", class: classExclusive, port: "mlx5_6", config: `{"charDevices":"diagnostics"}`, want: `charDevices: Forbidden: "diagnostics" exceeds the DeviceClass's allowedCharDevices "verbs"`},
	}
}

func (c refusedClaim) spec() resourceapi.ResourceClaimSpec {
	return framework.ClaimSpec([]framework.Request{{Name: "hca", Class: c.class, CEL: framework.OnPort(c.port)}}, "",
		framework.OpaqueConfig(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig",`+c.config[1:]))
}

// TestTenantBoundary: each claim of refusedClaims is refused by the webhook with the
// field, the limit and the class; with the webhook off the plugin refuses it at prepare,
// its pod never runs, and neither the host's interfaces and GID tables nor a pod that
// runs on the same ports are changed by it.
func TestTenantBoundary(t *testing.T) {
	h := networkHost(t)
	ctx := framework.Context(t, 15*time.Minute)
	rec, err := h.MockNetdevs()
	if err != nil {
		t.Fatal(err)
	}
	roce, err := framework.FindMockNetdev(rec, roceNetdevA)
	if err != nil {
		t.Fatal(err)
	}
	if len(roce.Addresses) == 0 {
		t.Fatalf("mock netdev %s has no host address", roceNetdevA)
	}
	claims := refusedClaims(roce.Addresses[0])

	// A bystander on the same RoCE port, on the default class, runs throughout.
	bns := env.NewNamespace(t, "bystander")
	env.CreateClaimTemplate(t, bns, "plain", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort(rocePortA)}}, ""))
	env.CreatePod(t, framework.ReportPod(bns, "bystander", "plain"))
	env.WaitReport(t, bns, "bystander")
	bystanderClaim := env.PodClaim(t, bns, "bystander")
	before := mustCaptureHost(t, h, rocePortA, rocePortB)

	t.Run("webhook refuses", func(t *testing.T) {
		ns := env.NewNamespace(t, "boundary-webhook")
		for _, c := range claims {
			t.Run(c.name, func(t *testing.T) {
				wants := []string{c.want}
				if !c.classFree {
					wants = append(wants, "(DeviceClass "+c.class+")")
				}
				if err := env.ExpectTemplateRefused(ctx, 2*time.Minute, ns, c.name, c.spec(), wants...); err != nil {
					t.Fatalf("%s: create: %v; want a refusal naming %q and DeviceClass %s", framework.DriverFault, err, c.want, c.class)
				}
			})
		}
	})

	t.Run("plugin refuses at prepare", func(t *testing.T) {
		env.NeedMockNode(t)
		if err := env.Install(ctx, shares, "webhook.enabled=false"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.Install(context.Background(), shares); err != nil {
				t.Errorf("reinstall with the webhook: %v", err)
			}
		})
		ns := env.NewNamespace(t, "boundary-plugin")
		for _, c := range claims {
			env.CreateClaimTemplate(t, ns, c.name, c.spec())
			env.CreatePod(t, framework.ReportPod(ns, c.name, c.name))
		}
		pending := map[string]string{}
		for _, c := range claims {
			pending[c.name] = c.want
		}
		framework.Eventually(t, ctx, 3*time.Minute, 2*time.Second, "a prepare error naming the limit for every refused pod", func(ctx context.Context) error {
			events, err := env.WarningEvents(ctx, ns, "FailedPrepareDynamicResources")
			if err != nil {
				return err
			}
			for _, e := range events {
				for pod, want := range pending {
					if strings.HasPrefix(e, pod+":") && strings.Contains(e, want) {
						delete(pending, pod)
					}
				}
			}
			if len(pending) > 0 {
				return fmt.Errorf("no event yet for %v; events: %v", pending, events)
			}
			return nil
		})
		for _, c := range claims {
			pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pod.Status.Phase == corev1.PodRunning || slices.ContainsFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.State.Running != nil }) {
				t.Errorf("%s: pod %s runs with a refused claim", framework.DriverFault, c.name)
			}
			if cp, err := env.Checkpoint(); err == nil {
				if e, ok := cp[string(env.PodClaim(t, ns, c.name).UID)]; ok {
					t.Errorf("%s: the refused claim of %s has a checkpoint entry: %+v", framework.DriverFault, c.name, e)
				}
			}
		}
	})

	// Nothing of the above reached the host or the bystander.
	expectHostRestored(t, h, before)
	pod, err := env.Client.CoreV1().Pods(bns).Get(ctx, "bystander", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the bystander is %s with %d restarts, want running throughout", pod.Status.Phase, pod.Status.ContainerStatuses[0].RestartCount)
	}
	if now := env.PodClaim(t, bns, "bystander"); now.UID != bystanderClaim.UID || !slices.Equal(allocatedDevices(now), allocatedDevices(bystanderClaim)) {
		t.Errorf("the bystander's claim changed: %v, was %v", allocatedDevices(now), allocatedDevices(bystanderClaim))
	}
}

// TestGrantedStaticAddressAndRoute: the static address and the route the default class
// refuses run under a pool whose admin grants static addresses and routes inside
// prefixes: the pod's interface has the address and the route, and a static address
// outside the prefix is still refused.
func TestGrantedStaticAddressAndRoute(t *testing.T) {
	host := networkHost(t)
	before := mustCaptureHost(t, host, rocePortA)
	pools, err := env.AddressPools()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := framework.Pool(pools, roceNetdevA)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := host.MockNetdevs()
	if err != nil {
		t.Fatal(err)
	}
	roce, err := framework.FindMockNetdev(rec, roceNetdevA)
	if err != nil {
		t.Fatal(err)
	}
	subnet := netip.MustParsePrefix(pool.Subnet)
	static, ok := freeStaticAddress(pool, roce.Addresses)
	if !ok {
		t.Fatalf("no address of %s outside pool %s's range and the host's addresses %v", subnet, pool.Name, roce.Addresses)
	}
	const route = "10.222.0.0/16"
	class := netPool(t, "e2e-static", v1alpha1.PoolModeShared, map[string]any{"allowedCharDevices": "verbs",
		"allowedNetwork": map[string]any{"modes": []string{"macvlan"}, "staticAddressPrefixes": []string{subnet.String()}, "routePrefixes": []string{route}}})
	ns := env.NewNamespace(t, "static")
	cfg := rdmaConfig(t, v1alpha1.NetworkConfig{Mode: ptrTo(v1alpha1.NetworkModeMacvlan), Addresses: []string{static.String()},
		Routes: []v1alpha1.RouteConfig{{Destination: route}}})
	env.CreateClaimTemplate(t, ns, "static", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: class, CEL: framework.OnPort(rocePortA)}}, "",
		framework.OpaqueConfig(cfg)))
	env.CreatePod(t, framework.ReportPod(ns, "static", "static"))
	expectAttached(t, ns, "static", podIf, 0, func(p netip.Prefix) error {
		if p != static {
			return fmt.Errorf("address %s, want the static %s", p, static)
		}
		return nil
	}, rocePortA)
	ctx := framework.Context(t, time.Minute)
	out, err := env.Exec(ctx, ns, "static", "ip", "route", "show", "dev", podIf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, route) {
		t.Errorf("routes of %s in the pod:\n%s\nwant %s", podIf, out, route)
	}

	// Outside the prefix, the webhook refuses it.
	outside := rdmaConfig(t, v1alpha1.NetworkConfig{Mode: ptrTo(v1alpha1.NetworkModeMacvlan), Addresses: []string{"172.31.9.9/24"}})
	outsideSpec := framework.ClaimSpec([]framework.Request{{Name: "hca", Class: class, CEL: framework.OnPort(rocePortA)}}, "", framework.OpaqueConfig(outside))
	if err := env.ExpectTemplateRefused(ctx, time.Minute, ns, "outside", outsideSpec,
		"is not inside one of the DeviceClass's allowedNetwork.staticAddressPrefixes"); err != nil {
		t.Errorf("%s: a static address outside the pool's prefix: %v", framework.DriverFault, err)
	}
	env.DeletePod(t, ns, "static")
	expectHostRestored(t, host, before)
}

// freeStaticAddress returns an address of the pool's subnet, with its prefix length,
// that is neither in the pool's range, nor the subnet's first host address (a gateway by
// convention), nor one of the host's addresses.
func freeStaticAddress(pool nodeconfig.AddressPool, host []netip.Prefix) (netip.Prefix, bool) {
	subnet := netip.MustParsePrefix(pool.Subnet)
	start, end := netip.MustParseAddr(pool.RangeStart), netip.MustParseAddr(pool.RangeEnd)
	a := subnet.Masked().Addr().Next().Next()
	for ; subnet.Contains(a); a = a.Next() {
		inRange := start.Compare(a) <= 0 && a.Compare(end) <= 0
		if !inRange && !slices.ContainsFunc(host, func(p netip.Prefix) bool { return p.Addr() == a }) && subnet.Contains(a.Next()) {
			return netip.PrefixFrom(a, subnet.Bits()), true
		}
	}
	return netip.Prefix{}, false
}

// allocatedDevices lists a claim's allocated devices.
func allocatedDevices(c *resourceapi.ResourceClaim) []string {
	if c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return out
}
