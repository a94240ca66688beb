// Package netattach attaches the network of an RDMA port into a pod's network namespace
// and undoes it, crash-safely, and finds the RoCE v2 GID index of the pod's own address.
//
// # Modes
//
//   - macvlan (mode bridge), ipvlan (mode l2), ipoib (datagram, with a P_Key): a child of
//     the port's netdev is created in one netlink request on its parent in the host and
//     placed in the pod's namespace (IFLA_NET_NS_FD) under a temporary name unique to the
//     attachment ("rdt" and 8 hex digits of a hash of pod UID, interface and parent), then
//     renamed to the pod name, given its MTU, addresses (IPv6 without DAD), up state and
//     routes. Creating it straight in the pod instead of creating it in the host and
//     moving it saves one namespace change (a synchronize_net in the kernel, 10-20 ms
//     here) and leaves no moment where the child is in the host.
//   - move: the netdev itself (a physical port; not a bond, which the kernel keeps in
//     its namespace: ErrBondNotMovable) is snapshotted (name, MAC, type, MTU, up, permanent
//     addresses, the routes not made by the kernel or router advertisements), refused if
//     it carries the node's traffic, itself or through a device stacked on it
//     (CheckNotPrimary), or if anything is stacked on it in the host at all (a master,
//     VLAN, macvlan, ipvlan: CheckNoUppers), brought down, renamed to the
//     temporary name in the host, moved, renamed to the pod name and configured; with
//     KeepHostAddress its addresses and its routes of the main table are added in the
//     pod. Detach moves it back and restores the snapshot exactly (routes of every
//     table, with their protocol, metric, table and source).
//   - In exclusive RDMA netns mode (Spec.RDMADevice) the RDMA device follows the netdev
//     into the pod and is returned before it.
//
// # The node's boundary
//
// Whatever Spec reaches it (its addresses and routes come from the claim's config or the
// node's address pools, checked before), Attach gives a pod no address the node holds
// (on any link of the host's namespace, or a node IP), no address that is the gateway
// of a host route of any table, and no route over a node address or through the node:
// it refuses with ErrNodeAddress, naming each address and why, before it saves or
// changes anything. KeepHostAddress is the admin's deliberate exception: the moved
// netdev's own addresses and routes go to the pod. Detach refuses a State whose pod
// namespace is the host's (ErrHostNamespace), as Attach does.
//
// # Crash safety
//
// The caller's Journal saves the State before every step that changes the system, so the
// saved State always covers at least what has been done (never less): the temporary name
// before anything is created, the child's MAC before it is renamed, the host snapshot
// before the netdev is touched, a moved netdev's ifindex in the pod before it is renamed
// there, the pod addresses before they are added, RDMAMoved before the RDMA move. Detach
// works from any saved State and any Phase, is idempotent, and identifies what is its
// own by the temporary name, and by kind and recorded MAC under the pod name (a child);
// a moved netdev, which a pod with NET_ADMIN may rename and give another MAC, by what
// the pod cannot change (moved.go): its ifindex in the pod, and its permanent address
// and parent device where the kernel reports them (which also find it after the kernel
// returned it to the host, possibly renamed devN, when the pod's namespace died; Detach
// waits for it up to Options.ReturnTimeout). It gives it back with its own MAC and name,
// after deleting what the pod stacked on it (which the kernel would leave in the pod,
// still receiving on the host's netdev).
// Attach never resumes: after a crash the caller detaches from the saved State and
// attaches again if the pod still runs.
//
// # RDMA kernel
//
// RDMAKernel is the RDMA side: SysfsKernel reads the host's GID table through pkg/sysfs
// and moves RDMA devices with RDMA netlink; EmulatedKernel does to a pkg/mocknode tree
// what the kernel does (GID entries per address added and removed, RDMA moves recorded)
// for machines without an RDMA subsystem. In exclusive mode the GID index is looked up
// before the RDMA device moves, from the host's sysfs, which no longer shows the device
// once it is in the pod.
//
// # What is proven where
//
// On the real kernel of the development machine (veth, bridge, macvlan; no dummy,
// ipvlan, bonding or RDMA), in private namespaces with a veth pair as the port's netdev
// and the emulated GID table (real_test.go, run as root): macvlan attach and detach with
// IPv4, IPv6, MTU and a gateway route, with a datagram from the pod reaching the far end
// of the port; move with the host's IPv4 and IPv6 addresses and routes taken into the pod
// and restored exactly (protocol and metric included), and its routes of other tables
// restored without going into the pod; a moved netdev that the pod renamed, gave
// another MAC, whose temporary name it took or on which it stacked a passthru macvlan,
// given back as it was; a crash at every journal save of macvlan and move converging by Detach; the
// pod namespace deleted before Detach (macvlan); the refusal of the netdev with the
// default route, and of a port with a macvlan (with and without a node IP) or a bridge
// master on it; the refusal of the node's addresses, of host routes' gateways (main and
// table 100) and of a default route; and BenchmarkAttachDetachMacvlan.
//
// Only with the fake netlink world (fake_test.go, an in-memory model of the kernel's rules
// that matter here): ipvlan, the IPoIB child and its P_Key, bonds (a macvlan on a bond,
// the up-front refusal to move a bond, which the kernel would refuse too because bonds
// are netns_immutable, CheckNotPrimary through bond master and slaves and through
// VLANs, macvlans and ipvlans stacked on them, CheckNoUppers),
// a moved physical netdev coming back from a dead pod namespace (renamed devN, late, or
// not in time, renamed and re-addressed by the pod), the exclusive-mode RDMA device move (against EmulatedKernel), and a
// failure of every netlink operation of Attach and Detach.
//
// On a real RDMA kernel, soft-RoCE in a VM (test/kernel, make e2e-kernel): SysfsKernel's
// GID lookup against the kernel's own entries for pod addresses (a verbs QP in the pod
// reaches RTR with the index found, and not with the host's), their removal on Detach,
// and RdmaLinkSetNsFd's refusal for a device that cannot move (rxe), undone cleanly. A
// successful RDMA device move needs hardware that can move (mlx5).
package netattach
