package mocknet

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Link kinds of stand-ins and of the probe.
const (
	KindVeth    = "veth"
	KindDummy   = "dummy"
	KindBridge  = "bridge"
	KindMacvlan = "macvlan"
	KindIPVlan  = "ipvlan"
	KindBond    = "bond"
	KindIFB     = "ifb"
)

// Kernel is which link kinds the host kernel can create, by kind.
type Kernel map[string]bool

// String lists the kinds the kernel has and has not, for logs.
func (k Kernel) String() string {
	var has, not []string
	for kind, ok := range k {
		if ok {
			has = append(has, kind)
		} else {
			not = append(not, kind)
		}
	}
	sort.Strings(has)
	sort.Strings(not)
	return "has " + strings.Join(has, ",") + "; lacks " + strings.Join(not, ",")
}

// PortKind is the kind that stands in for a port netdev: a veth end (movable between
// namespaces, with carrier while its peer is up), else a dummy link. A bridge cannot
// leave its namespace, so it is no stand-in for a netdev that move mode takes.
func (k Kernel) PortKind() (string, error) {
	for _, kind := range []string{KindVeth, KindDummy} {
		if k[kind] {
			return kind, nil
		}
	}
	return "", fmt.Errorf("the kernel can create neither veth nor dummy links (%s): no stand-ins for the mock node's netdevs", k)
}

// Probe finds out which link kinds the kernel can create by creating a throwaway link of
// each in a private network namespace, which goes away with everything in it. Reading
// /proc/modules would miss built-in drivers and cannot tell whether a module may load.
func Probe() (Kernel, error) {
	k := Kernel{}
	err := InPrivateNetns(func(h *netlink.Handle) error {
		try := func(kind string, l netlink.Link) {
			err := h.LinkAdd(l)
			k[kind] = err == nil
			if err == nil {
				_ = h.LinkDel(l)
			}
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe-veth"}, PeerName: "probe-peer"}
		if err := h.LinkAdd(veth); err == nil {
			k[KindVeth] = true
			parent, err := h.LinkByName("probe-veth")
			if err == nil {
				try(KindMacvlan, &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "probe-mv", ParentIndex: parent.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE})
				try(KindIPVlan, &netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: "probe-ipv", ParentIndex: parent.Attrs().Index}, Mode: netlink.IPVLAN_MODE_L2})
			}
			_ = h.LinkDel(veth)
		} else {
			k[KindVeth] = false
		}
		try(KindDummy, &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "probe-dummy"}})
		try(KindBridge, &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "probe-br"}})
		try(KindBond, netlink.NewLinkBond(netlink.LinkAttrs{Name: "probe-bond"}))
		try(KindIFB, &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: "probe-ifb"}})
		return nil
	})
	return k, err
}

// InPrivateNetns runs fn with a netlink handle in a new, empty network namespace, which
// is gone (with every link in it) once fn returns. The calling thread's namespace is not
// changed: a dedicated OS thread enters the new namespace, and is discarded afterwards
// whatever namespace it is left in.
func InPrivateNetns(fn func(*netlink.Handle) error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			errc <- fmt.Errorf("create a private network namespace: %w", err)
			return
		}
		defer ns.Close()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("return to the original network namespace: %w", err)
			return
		}
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			errc <- fmt.Errorf("netlink handle in the private namespace: %w", err)
			return
		}
		defer h.Close()
		errc <- fn(h)
	}()
	return <-errc
}

// errNotOurs marks an interface the tool did not create.
var errNotOurs = errors.New("not created by the local cluster")
