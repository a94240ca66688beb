// Package mocknet gives the mock node's network interfaces a body: for every netdev of
// the mock sysfs tree that an RDMA port uses (a RoCE port's netdev, the IPoIB interface of
// an InfiniBand port, a bond and its slaves), a real interface on the host with the tree's
// name, MAC, MTU and addresses, up. The driver's network attachment then does real kernel
// work on them (macvlan children, moves between namespaces, addresses), while the RDMA half
// (GID tables, RDMA device moves) stays emulated over the tree.
//
// The host kernel decides what a stand-in is made of (Probe): a port netdev is one end of
// a veth pair whose peer stays up in the host (so the end has carrier), or a dummy link
// where the kernel has dummy but no veth; a bond is a bridge with its slaves as ports. What
// was created is recorded in a file, and Remove deletes only what the record names and
// still finds with the recorded kind and MAC: an interface the tool did not create is never
// touched.
package mocknet

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Role is what a netdev of the tree is for.
type Role string

// The roles of planned links.
const (
	// RoleRoCE is the netdev of a RoCE port.
	RoleRoCE Role = "roce"
	// RoleIPoIB is the IPoIB interface of an InfiniBand port. The stand-in is an Ethernet
	// link: the kernel here has no ib_ipoib, and an IPoIB hardware address (20 bytes) does
	// not fit one, so its MAC is derived from the port GUID (IPoIBStandInMAC).
	RoleIPoIB Role = "ipoib"
	// RoleBond is a bond that RoCE ports' GIDs belong to (LAG); its stand-in is a bridge.
	RoleBond Role = "bond"
	// RoleBondSlave is a slave of a bond; its stand-in is a port of the bond's bridge.
	RoleBondSlave Role = "bond-slave"
)

// Link is one netdev of the tree and what stands in for it on the host.
type Link struct {
	// Name is the tree's netdev name, the stand-in's name on the host.
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Kind is the stand-in's link kind (KindVeth, KindDummy, KindBridge); set by Create.
	Kind string `json:"kind,omitempty"`
	// HardwareAddr is the stand-in's MAC: the tree's, or derived (IPoIB).
	HardwareAddr string `json:"hardwareAddr"`
	// TreeHardwareAddr is the tree's address where it differs from HardwareAddr.
	TreeHardwareAddr string `json:"treeHardwareAddr,omitempty"`
	MTU              int    `json:"mtu"`
	// Addresses are the host addresses of the netdev: the IPv4-mapped (as /24) and global
	// IPv6 (as /64) RoCE v2 GIDs of the tree whose ndev is this netdev. The tree has no
	// prefix lengths, so these are assumed. IPoIB interfaces have none in the tree.
	Addresses []netip.Prefix `json:"addresses,omitempty"`
	// Ports are the RDMA ports ("mlx5_8/1") that use the netdev.
	Ports []string `json:"ports,omitempty"`
	// Master is the bond a slave belongs to.
	Master string `json:"master,omitempty"`
	// Peer and PeerHardwareAddr name the host end of a veth stand-in; set by Create.
	Peer             string `json:"peer,omitempty"`
	PeerHardwareAddr string `json:"peerHardwareAddr,omitempty"`
}

// Plan is the netdevs of one tree, sorted: bonds before their slaves, else by name.
type Plan struct {
	Links []Link `json:"links"`
}

// assumed prefix lengths of the addresses read from GID tables.
const (
	ipv4Bits = 24
	ipv6Bits = 64
)

// PlanTree reads the netdevs of the RDMA ports of the mock sysfs tree at sysRoot.
func PlanTree(ctx context.Context, sysRoot string) (*Plan, error) {
	inv, err := discovery.New(discovery.Options{SysfsRoot: sysRoot}).Discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover the mock tree: %w", err)
	}
	fsys, err := sysfs.Open(sysRoot)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Link{}
	var order []string
	add := func(l Link) *Link {
		if have, ok := byName[l.Name]; ok {
			return have
		}
		byName[l.Name] = &l
		order = append(order, l.Name)
		return &l
	}
	for _, p := range inv.Ports {
		if p.Netdev == "" {
			continue
		}
		var role Role
		switch {
		case p.LinkLayer == discovery.LinkLayerEthernet && fsys.Exists(path.Join("class/net", p.Netdev, "bonding")):
			role = RoleBond
		case p.LinkLayer == discovery.LinkLayerEthernet:
			role = RoleRoCE
		case p.LinkLayer == discovery.LinkLayerInfiniBand:
			role = RoleIPoIB
		default:
			continue
		}
		l, err := readNetdev(fsys, p.Netdev, role)
		if err != nil {
			return nil, err
		}
		pl := add(l)
		pl.Ports = append(pl.Ports, fmt.Sprintf("%s/%d", p.IBDev, p.Port))
		if role == RoleIPoIB {
			continue
		}
		addrs, err := gidAddresses(fsys, p.IBDev, p.Port, p.Netdev)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if !slices.Contains(pl.Addresses, a) {
				pl.Addresses = append(pl.Addresses, a)
			}
		}
		if role == RoleBond {
			slaves, err := sysfs.Read(fsys, path.Join("class/net", p.Netdev, "bonding/slaves"), sysfs.ParseBondSlaves)
			if err != nil {
				return nil, fmt.Errorf("slaves of bond %s: %w", p.Netdev, err)
			}
			for _, s := range slaves {
				sl, err := readNetdev(fsys, s, RoleBondSlave)
				if err != nil {
					return nil, err
				}
				sl.Master = p.Netdev
				add(sl)
			}
		}
	}
	plan := &Plan{}
	for _, n := range order {
		l := byName[n]
		slices.SortFunc(l.Addresses, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		plan.Links = append(plan.Links, *l)
	}
	plan.sort()
	err = plan.Validate()
	return plan, err
}

// sort orders bonds first (slaves need their bridge), then by name.
func (p *Plan) sort() {
	rank := func(r Role) int {
		if r == RoleBond {
			return 0
		}
		return 1
	}
	slices.SortFunc(p.Links, func(a, b Link) int {
		return cmp.Or(cmp.Compare(rank(a.Role), rank(b.Role)), cmp.Compare(a.Name, b.Name))
	})
}

// Validate checks what the kernel would refuse or what would make two stand-ins one:
// names, MACs, MTUs, masters.
//
// Two links may have one MAC only when they belong to one bond: the bond and a slave, or
// two slaves. An 802.3ad bond takes the MAC of its first slave and gives it to all of
// them (so do the other modes but balance-tlb and balance-alb, unless fail_over_mac says
// otherwise), so the tree of a bonded node has it on every member; the kernel accepts
// equal MACs on the bridge and veth ends that stand in for them. Any other shared MAC is
// a mistake of the tree, and would leave two unrelated stand-ins that only their names
// tell apart.
func (p *Plan) Validate() error {
	names, macs := map[string]bool{}, map[string]Link{}
	roles := map[string]Role{}
	for _, l := range p.Links {
		roles[l.Name] = l.Role
	}
	for _, l := range p.Links {
		if l.Name == "" || len(l.Name) > 15 {
			return fmt.Errorf("netdev name %q: must be 1 to 15 characters", l.Name)
		}
		if names[l.Name] {
			return fmt.Errorf("netdev %s planned twice", l.Name)
		}
		names[l.Name] = true
		if l.Master != "" && roles[l.Master] != RoleBond {
			return fmt.Errorf("netdev %s: master %s is not a bond of the plan", l.Name, l.Master)
		}
		hw, err := net.ParseMAC(l.HardwareAddr)
		if err != nil || len(hw) != 6 || hw[0]&1 != 0 {
			return fmt.Errorf("netdev %s: %q is not a unicast MAC", l.Name, l.HardwareAddr)
		}
		switch other, ok := macs[hw.String()]; {
		case !ok:
			macs[hw.String()] = l
		case bondOf(other) != bondOf(l):
			return fmt.Errorf("netdevs %s and %s have one MAC %s and are not one bond and its slaves", other.Name, l.Name, hw)
		}
		if l.MTU < 68 || l.MTU > 65535 {
			return fmt.Errorf("netdev %s: MTU %d out of range", l.Name, l.MTU)
		}
	}
	return nil
}

// bondOf names the bond a link belongs to: its master, or itself (a bond, or a link in
// no bond, which is then alone in its group).
func bondOf(l Link) string {
	if l.Master != "" {
		return l.Master
	}
	return l.Name
}

// readNetdev reads the name, MAC and MTU of a netdev of the tree.
func readNetdev(fsys *sysfs.FS, name string, role Role) (Link, error) {
	dir := path.Join("class/net", name)
	addr, err := fsys.ReadString(path.Join(dir, "address"))
	if err != nil {
		return Link{}, fmt.Errorf("address of netdev %s: %w", name, err)
	}
	mtu, err := sysfs.Read(fsys, path.Join(dir, "mtu"), sysfs.ParseDecimal)
	if err != nil {
		return Link{}, fmt.Errorf("MTU of netdev %s: %w", name, err)
	}
	l := Link{Name: name, Role: role, HardwareAddr: addr, MTU: mtu}
	hw, err := net.ParseMAC(addr)
	if err != nil {
		return Link{}, fmt.Errorf("address of netdev %s: %w", name, err)
	}
	if len(hw) != 6 {
		l.TreeHardwareAddr = addr
		l.HardwareAddr = IPoIBStandInMAC(hw).String()
	}
	return l, nil
}

// IPoIBStandInMAC is the Ethernet MAC of the stand-in of an IPoIB interface whose
// hardware address is hw (20 bytes: QPN, then the port GID, whose last 8 bytes are the
// port GUID): locally administered (02), then the GUID's last five bytes, which differ
// between the ports of one node.
func IPoIBStandInMAC(hw net.HardwareAddr) net.HardwareAddr {
	out := net.HardwareAddr{0x02, 0, 0, 0, 0, 0}
	if len(hw) >= 5 {
		copy(out[1:], hw[len(hw)-5:])
	}
	return out
}

// gidAddresses returns the host addresses that the RoCE v2 GID entries of the port on
// netdev ndev stand for, in table order.
func gidAddresses(fsys *sysfs.FS, ibdev string, port int, ndev string) ([]netip.Prefix, error) {
	dir := path.Join("class/infiniband", ibdev, "ports", strconv.Itoa(port))
	names, err := fsys.ReadDirNames(path.Join(dir, "gids"))
	if err != nil {
		return nil, fmt.Errorf("GID table of %s port %d: %w", ibdev, port, err)
	}
	idx := make([]int, 0, len(names))
	for _, n := range names {
		if i, err := strconv.Atoi(n); err == nil {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	var out []netip.Prefix
	for _, i := range idx {
		s := strconv.Itoa(i)
		typ, err := sysfs.Read(fsys, path.Join(dir, "gid_attrs/types", s), sysfs.ParseGIDType)
		if err != nil || typ != sysfs.GIDTypeRoCEv2 {
			continue // unused entries have no type
		}
		if nd, err := fsys.ReadString(path.Join(dir, "gid_attrs/ndevs", s)); err != nil || nd != ndev {
			continue
		}
		gid, err := sysfs.Read(fsys, path.Join(dir, "gids", s), sysfs.ParseGID)
		if err != nil {
			return nil, fmt.Errorf("GID %d of %s port %d: %w", i, ibdev, port, err)
		}
		switch a := gid.Addr(); {
		case gid.IsIPv4Mapped():
			out = append(out, netip.PrefixFrom(a.Unmap(), ipv4Bits))
		case gid.IsGlobalIPv6():
			out = append(out, netip.PrefixFrom(a, ipv6Bits))
		}
	}
	return out, nil
}
