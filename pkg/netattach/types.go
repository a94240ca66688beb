package netattach

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/utils/clock"
)

// Mode is how a port's network is attached into a pod.
type Mode string

const (
	// ModeNone attaches nothing (the pod gets only the RDMA char devices).
	ModeNone Mode = "none"
	// ModeMacvlan creates a macvlan child (mode bridge) of the port's netdev in the pod.
	ModeMacvlan Mode = "macvlan"
	// ModeIPVlan creates an ipvlan child (mode l2) of the port's netdev in the pod.
	ModeIPVlan Mode = "ipvlan"
	// ModeMove moves the port's netdev itself into the pod (not a bond: the kernel keeps
	// bonds in their namespace).
	ModeMove Mode = "move"
	// ModeIPoIB creates an IPoIB child (datagram mode, with a P_Key) of the port's IPoIB netdev.
	ModeIPoIB Mode = "ipoib"
)

// Route is one route added in the pod. A zero Gateway means a link-scope route.
type Route struct {
	Dst     netip.Prefix `json:"dst"`
	Gateway netip.Addr   `json:"gateway,omitzero"`
}

// Spec is what to attach for one allocated device into one pod.
type Spec struct {
	Mode Mode `json:"mode"`
	// HostNetdev is the parent of the macvlan/ipvlan/ipoib child (a bond may be one), or
	// the netdev moved (a bond may not: ErrBondNotMovable).
	HostNetdev string `json:"hostNetdev"`
	// PodIfName is the interface name inside the pod.
	PodIfName string `json:"podIfName"`
	// MTU of the pod interface; 0 keeps the parent's (or, in move mode, the netdev's own).
	MTU int `json:"mtu,omitempty"`
	// Addresses are added to the pod interface.
	Addresses []netip.Prefix `json:"addresses,omitempty"`
	// Routes are added in the pod, through the pod interface.
	Routes []Route `json:"routes,omitempty"`
	// KeepHostAddress (move mode): the host's addresses and routes of the netdev go with it into the pod.
	KeepHostAddress bool `json:"keepHostAddress,omitempty"`
	// PKey of the IPoIB child; 0 means the parent's default, the full 0xffff.
	PKey uint16 `json:"pkey,omitempty"`
	// RDMADevice, set in exclusive RDMA netns mode, is the ibdev moved into the
	// pod's namespace after the netdev (and returned before it).
	RDMADevice string `json:"rdmaDevice,omitempty"`
	// IBDevice is the ibdev whose GID table is searched for the pod address
	// (defaults to RDMADevice); empty skips the GID lookup.
	IBDevice string `json:"ibDevice,omitempty"`
	// IBPort is the RDMA port, for the GID lookup.
	IBPort int `json:"ibPort,omitempty"`
}

// Target is the pod whose network namespace receives the attachment.
type Target struct {
	PodUID    string `json:"podUID"`
	NetnsPath string `json:"netnsPath"`
}

// Phase is where an attachment stands in its life.
type Phase string

const (
	// PhaseAttaching means Attach is (or was, before a crash) under way.
	PhaseAttaching Phase = "Attaching"
	// PhaseAttached means everything in the Spec is in place.
	PhaseAttached Phase = "Attached"
	// PhaseDetaching means Detach is (or was) under way.
	PhaseDetaching Phase = "Detaching"
)

// HostSnapshot is the host netdev as it was before it moved into a pod (move mode).
type HostSnapshot struct {
	Name string `json:"name"`
	// HardwareAddr is the netdev's MAC, which Detach gives back to it (the pod may
	// change it, so it identifies the netdev only where nothing below is recorded).
	HardwareAddr string `json:"hardwareAddr"`
	// Index is the netdev's ifindex in the host before it moved.
	Index int `json:"index,omitempty"`
	// PermHardwareAddr, ParentDev and ParentDevBus are what the driver gave a physical
	// netdev (IFLA_PERM_ADDRESS, IFLA_PARENT_DEV_NAME and _BUS_NAME: its burnt-in
	// address and its PCI function) where the kernel reports them. Nobody can change
	// them, so they identify the netdev whatever the pod named it or whatever MAC it gave
	// it. Empty for virtual netdevs and on kernels that do not report them.
	PermHardwareAddr string `json:"permHardwareAddr,omitempty"`
	ParentDev        string `json:"parentDev,omitempty"`
	ParentDevBus     string `json:"parentDevBus,omitempty"`
	// Type is the kernel's link kind ("device" for a physical netdev, "bond", "veth" ...).
	Type      string         `json:"type"`
	MTU       int            `json:"mtu"`
	Up        bool           `json:"up"`
	Addresses []netip.Prefix `json:"addresses,omitempty"`
	Routes    []HostRoute    `json:"routes,omitempty"`
}

// HostRoute is a route of the host through a netdev that moved, as it is restored.
// Routes the kernel makes itself (the prefix routes of addresses) are not recorded.
// Routes of every table are (per-rail policy routing keeps a rail's routes in a table
// of its own); Table is 0 for main.
type HostRoute struct {
	Dst      netip.Prefix `json:"dst"`
	Gateway  netip.Addr   `json:"gateway,omitzero"`
	Src      netip.Addr   `json:"src,omitzero"`
	Priority int          `json:"priority,omitempty"`
	Table    int          `json:"table,omitempty"`
	// Protocol is who added the route (RTPROT_BOOT for `ip route add`, RTPROT_STATIC
	// ...): restored as it was, so that routing daemons still recognise their routes.
	Protocol int `json:"protocol,omitempty"`
}

// State is the journal of one attachment: saved (by the caller's Journal)
// BEFORE every step that changes the system, holding enough to undo from any
// point after a crash.
type State struct {
	Spec   Spec   `json:"spec"`
	Target Target `json:"target"`
	Phase  Phase  `json:"phase"`
	// TempName: a child is created in the host namespace under a unique
	// temporary name, then moved and renamed.
	TempName string `json:"tempName,omitempty"`
	// Host (move mode): the netdev before it moved.
	Host *HostSnapshot `json:"host,omitempty"`
	// PodIndex (move mode) is the netdev's ifindex in the pod's namespace, recorded as
	// soon as it is there: the pod cannot change it (nor give it to another link while
	// the netdev holds it), so Detach finds the netdev by it in the pod.
	PodIndex int `json:"podIndex,omitempty"`
	// HardwareAddr of the pod interface, for the claim's networkData.
	HardwareAddr string `json:"hardwareAddr,omitempty"`
	// PodAddresses is what the pod interface ended up with.
	PodAddresses []netip.Prefix `json:"podAddresses,omitempty"`
	// GIDIndex is the RoCE v2 GID index of the pod's first IPv4 (else global IPv6) address.
	GIDIndex *int `json:"gidIndex,omitempty"`
	// RDMAMoved: the RDMA device may be in the pod's namespace (set before the move).
	RDMAMoved bool `json:"rdmaMoved,omitempty"`
}

// Journal persists a State; Attach and Detach call it before every step that
// changes the system. An error stops the operation (and Attach undoes what it did).
type Journal func(State) error

// RDMAKernel is the RDMA side of the kernel: moving an RDMA device between
// network namespaces and the GID table.
type RDMAKernel interface {
	// MoveDevice moves the RDMA device into the namespace of netnsFD.
	MoveDevice(ctx context.Context, ibdev string, netnsFD int) error
	// ReturnDevice moves the RDMA device back into the host namespace
	// (hostNetnsFD) from the pod's namespace podNetnsFD; podNetnsFD is -1 when that
	// namespace is gone (the kernel has then returned the device already).
	ReturnDevice(ctx context.Context, ibdev string, podNetnsFD, hostNetnsFD int) error
	// AddressAdded tells the kernel model that addr was added to ndev (in a pod);
	// the real kernel does the GID update itself, so it is a no-op there.
	AddressAdded(ctx context.Context, ibdev string, port int, ndev string, addr netip.Addr) error
	// AddressRemoved is the reverse of AddressAdded.
	AddressRemoved(ctx context.Context, ibdev string, port int, ndev string, addr netip.Addr) error
	// FindGID polls, bounded and context-aware, for the RoCE v2 GID entry of addr
	// on ibdev/port (ndev, when the kernel exposes it, must name the pod interface).
	FindGID(ctx context.Context, ibdev string, port int, ndev string, addr netip.Addr) (int, error)
}

// Netlink is the part of a per-namespace netlink handle the package uses.
// *netlink.Handle implements it; tests use an in-memory model.
type Netlink interface {
	LinkByName(name string) (netlink.Link, error)
	LinkByIndex(index int) (netlink.Link, error)
	LinkList() ([]netlink.Link, error)
	LinkAdd(link netlink.Link) error
	LinkDel(link netlink.Link) error
	LinkSetUp(link netlink.Link) error
	LinkSetDown(link netlink.Link) error
	LinkSetName(link netlink.Link, name string) error
	LinkSetMTU(link netlink.Link, mtu int) error
	LinkSetHardwareAddr(link netlink.Link, hwaddr net.HardwareAddr) error
	LinkSetNsFd(link netlink.Link, fd int) error
	AddrList(link netlink.Link, family int) ([]netlink.Addr, error)
	AddrAdd(link netlink.Link, addr *netlink.Addr) error
	// RouteList lists the main table's routes only.
	RouteList(link netlink.Link, family int) ([]netlink.Route, error)
	// RouteListFiltered lists every table's routes with RT_FILTER_TABLE and Table 0.
	RouteListFiltered(family int, filter *netlink.Route, filterMask uint64) ([]netlink.Route, error)
	RouteAdd(route *netlink.Route) error
}

// Namespace is an open network namespace: a netlink handle in it and a file
// descriptor naming it (for LinkSetNsFd and RDMA moves). Close releases both.
type Namespace interface {
	Netlink() Netlink
	FD() int
	// ID identifies the namespace itself (its nsfs device and inode), so that two
	// paths to one namespace compare equal.
	ID() string
	Close() error
}

// Namespaces opens network namespaces. Open returns an error wrapping
// ErrNamespaceGone when the path no longer names a namespace.
type Namespaces interface {
	// Host opens the namespace the driver manages interfaces in (the node's).
	Host(ctx context.Context) (Namespace, error)
	// Open opens the namespace at a path such as /var/run/netns/cni-... or /proc/<pid>/ns/net.
	Open(ctx context.Context, path string) (Namespace, error)
}

// Options configure an Attacher.
type Options struct {
	// Namespaces opens the host's and the pods' namespaces; nil means the real ones.
	Namespaces Namespaces
	// Kernel is the RDMA kernel (real sysfs + RDMA netlink, or the emulator); nil
	// disables GID lookups and refuses specs with an RDMADevice.
	Kernel RDMAKernel
	// Clock times the steps for logs and paces waits; nil means the real clock.
	Clock clock.Clock
	// TempPrefix starts the temporary host-side names of children ("rdt" when empty).
	TempPrefix string
	// NodeIPs are the node's own addresses (the kubelet's node IPs): move mode never
	// takes a netdev that carries one, nor the one with the default route.
	NodeIPs []netip.Addr
	// IPoIBStandIn creates a macvlan where an IPoIB child is asked for: for mock nodes,
	// whose kernel has no ib_ipoib and whose IPoIB netdevs are stand-ins themselves.
	IPoIBStandIn bool
	// ReturnTimeout bounds how long Detach waits for a moved netdev to come back to the
	// host after its pod's namespace is gone (the kernel returns it asynchronously); 5 s when 0.
	ReturnTimeout time.Duration
}

// Attacher attaches and detaches port networks into pods. It is safe for
// concurrent use on different netdevs; the caller serializes operations on one
// netdev (and on one State).
type Attacher struct {
	ns            Namespaces
	kernel        RDMAKernel
	clock         clock.Clock
	tempPrefix    string
	nodeIPs       []netip.Addr
	returnTimeout time.Duration
	ipoibStandIn  bool
	// noUndo keeps Attach from undoing on failure: tests use it to leave the system as a
	// crash at that point would.
	noUndo bool
}
