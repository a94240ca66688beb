//go:build kernelvm

package invm

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
	"github.com/rdma-dra/rdma-dra-driver/test/kernel/rdmacore"
)

// setNetnsMode switches the RDMA subsystem's netns mode. The kernel refuses while any
// other network namespace exists (EBUSY), and namespaces die asynchronously after their
// last reference, so it is retried until the earlier tests' namespaces are gone.
func setNetnsMode(t *testing.T, mode string) {
	t.Helper()
	eventually(t, "rdma system set netns "+mode, func() (bool, string) {
		if _, err := tryRun("rdma", "system", "set", "netns", mode); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// TestNetnsMode reads the netns mode through the real RDMA netlink family, in both
// modes, with the driver's library and its CLI, against `rdma system show`.
func TestNetnsMode(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := newRoCE(t, "rxe5", "veth5", "veth5p")
	t.Cleanup(func() { setNetnsMode(t, "shared") })
	for _, mode := range []string{"exclusive", "shared"} {
		t.Run(mode, func(t *testing.T) {
			setNetnsMode(t, mode)
			got, err := rdmacore.ParseNetnsMode(run(t, "rdma", "system", "show"))
			if err != nil {
				t.Fatal(err)
			}
			if got != mode {
				t.Fatalf("rdma system show says %s after set netns %s", got, mode)
			}
			inv, err := discovery.New(discovery.Options{UseNetlink: true}).Discover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(inv.NetnsMode) != mode {
				t.Errorf("discovery over netlink: %q, want %q", inv.NetnsMode, mode)
			}
			if cli := discoverCLI(t); string(cli.NetnsMode) != mode {
				t.Errorf("rdma-dra discover: %q, want %q", cli.NetnsMode, mode)
			}
			// What the plugin does with it: the publisher's answer (which makes prepare
			// refuse shares in exclusive mode) and the rdma_netns attribute of the slices.
			out := &sink{}
			pub := publish.New(discovery.New(discovery.Options{UseNetlink: true}),
				devicemodel.Options{NodeName: "vm"}, publish.ModelPartitionable, publish.Options{})
			pub.SetSink(out)
			if err := pub.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := pub.NetnsExclusive(); got != (mode == "exclusive") {
				t.Errorf("Publisher.NetnsExclusive() = %v in %s mode", got, mode)
			}
			devices := out.devices(r.IBDev, 1)
			if len(devices) == 0 {
				t.Fatalf("no device of %s published", r.IBDev)
			}
			for _, d := range devices {
				v, ok := devicemodel.LookupAttribute(devicemodel.DefaultDriverName, &d, devicemodel.AttrRDMANetns)
				if !ok || v.StringValue == nil || *v.StringValue != mode {
					t.Errorf("device %s: %s = %+v, want %q", d.Name, devicemodel.AttrRDMANetns, v, mode)
				}
			}
		})
	}
}

// TestExclusiveModeAttach runs the attachment of exclusive mode, where the RDMA device
// must follow the netdev into the pod, against a device that cannot move (rxe: the
// kernel answers EOPNOTSUPP; mlx5 devices can move). The attachment must fail with the
// move named, and leave nothing behind: no interface in the pod, no temporary interface
// in the host, the device where it was.
func TestExclusiveModeAttach(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	setNetnsMode(t, "exclusive")
	t.Cleanup(func() { setNetnsMode(t, "shared") })
	r := newRoCE(t, "rxe4", "veth4", "veth4p")
	path := newNetns(t, "xpod")
	att := netattach.NewAttacher(netattach.Options{Kernel: netattach.NewSysfsKernel("/sys")})
	spec := netattach.Spec{
		Mode: netattach.ModeMacvlan, HostNetdev: r.Netdev, PodIfName: "net1",
		Addresses:  []netip.Prefix{netip.MustParsePrefix("192.168.80.11/24")},
		RDMADevice: r.IBDev, IBPort: 1,
	}
	st, err := att.Attach(ctx, spec, netattach.Target{PodUID: "xpod", NetnsPath: path}, noJournal)
	t.Logf("attach: state %+v, error %v", st, err)
	if err == nil {
		_ = att.Detach(ctx, st, noJournal)
		t.Fatal("attach moved an rxe device into a pod; the kernel cannot do that")
	}
	if want := "move RDMA device " + r.IBDev; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "operation not supported") {
		t.Errorf("the error does not say %q and the kernel's answer: %v", want, err)
	}
	if out := run(t, "ip", "-n", "xpod", "-o", "link", "show"); strings.Contains(out, "net1") {
		t.Errorf("the pod kept net1 after the failed attach:\n%s", out)
	}
	if out := run(t, "ip", "-o", "link", "show"); strings.Contains(out, "rdt") {
		t.Errorf("a temporary interface is left in the host:\n%s", out)
	}
	var links []rdmacore.Link
	runJSON(t, &links, "rdma", "-j", "link", "show")
	if findLink(links, r.IBDev, 1) == nil {
		t.Errorf("%s is no longer in the host: %+v", r.IBDev, links)
	}
}
