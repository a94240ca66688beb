// Package fabric says whether an RDMA port is ready for traffic, from the few sysfs files
// that tell (sysfs.md): the logical port state, on InfiniBand the subnet manager's LID
// and the P_Key table, on RoCE a GID that NCCL and rdma_cm can use. The kubelet plugin
// asks it before a pod of a gated port is bound (binding conditions) and before such a
// claim is prepared.
//
// A check reads files below the sysfs root and nothing else; it never writes.
package fabric

import (
	"fmt"
	"strconv"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Reasons of a NotReady error, in the CamelCase of a condition's reason.
const (
	// ReasonPortNotActive: the port's logical state is not ACTIVE.
	ReasonPortNotActive = "PortNotActive"
	// ReasonNoSubnetManager: an InfiniBand port knows no subnet manager (sm_lid 0).
	ReasonNoSubnetManager = "NoSubnetManager"
	// ReasonPKeyMissing: the P_Key the claim names is not in the port's table.
	ReasonPKeyMissing = "PKeyMissing"
	// ReasonNoGID: a RoCE port has no GID that traffic can use.
	ReasonNoGID = "NoUsableGID"
	// ReasonUnreadable: a file that tells could not be read or parsed.
	ReasonUnreadable = "Unreadable"
)

// NotReady is why a port is not ready for traffic. Its message names the port the way
// a user finds it (mlx5_2/1) and what is missing.
type NotReady struct {
	// Port is ibdev/port, e.g. mlx5_2/1.
	Port string
	// Reason is one of the Reason constants.
	Reason string
	// Detail is what is missing, in words: "no subnet manager: sm_lid 0".
	Detail string
}

// Error says what is missing: "port mlx5_2/1 is DOWN", "port mlx5_2/1: no subnet manager: sm_lid 0".
func (e *NotReady) Error() string {
	if e.Reason == ReasonPortNotActive {
		return "port " + e.Port + " is " + e.Detail
	}
	return "port " + e.Port + ": " + e.Detail
}

// Want is what a claim needs of a port besides the port being up.
type Want struct {
	// PKey, when set, must be in an InfiniBand port's P_Key table with at least the
	// membership it asks for: a full-member key (0x8000 set) needs a full-member entry,
	// a limited one takes either. On other link layers it is not checked.
	PKey *uint16
}

// Checker reads ports below a sysfs root.
type Checker struct {
	root string
}

// New returns a checker of the sysfs tree at root (the node's /sys, or a mock tree).
func New(root string) *Checker {
	return &Checker{root: root}
}

// check is one check's view of the tree: a sysfs.FS caches listings and resolved paths,
// so each check opens its own and sees the tree as it is now.
type check struct {
	fs *sysfs.FS
}

// Check returns nil when port p is ready for traffic and the claim's wants are met, else
// a *NotReady saying what is missing. The port's link layer comes from discovery (p); the
// state, subnet manager, P_Keys and GIDs are read now:
//
//   - every port: state ACTIVE;
//   - InfiniBand: sm_lid not 0, and want.PKey in the P_Key table;
//   - Ethernet (RoCE): a RoCE v2 GID whose address is IPv4-mapped or global IPv6, the
//     entry the GID index rule of sysfs.md would pick.
func (c *Checker) Check(p *discovery.Port, want Want) error {
	name := p.IBDev + "/" + strconv.Itoa(p.Port)
	dir := "class/infiniband/" + p.IBDev + "/ports/" + strconv.Itoa(p.Port)
	unreadable := func(what string, err error) error {
		return &NotReady{Port: name, Reason: ReasonUnreadable, Detail: fmt.Sprintf("read %s: %v", what, err)}
	}
	fs, err := sysfs.Open(c.root)
	if err != nil {
		return unreadable("sysfs", err)
	}
	cc := check{fs: fs}
	state, err := sysfs.Read(cc.fs, dir+"/state", sysfs.ParsePortState)
	if err != nil {
		return unreadable("state", err)
	}
	if state != "ACTIVE" {
		return &NotReady{Port: name, Reason: ReasonPortNotActive, Detail: state}
	}
	switch p.LinkLayer {
	case discovery.LinkLayerInfiniBand:
		smLID, err := sysfs.Read(cc.fs, dir+"/sm_lid", sysfs.ParseLID)
		if err != nil {
			return unreadable("sm_lid", err)
		}
		if smLID == 0 {
			return &NotReady{Port: name, Reason: ReasonNoSubnetManager, Detail: "no subnet manager: sm_lid 0"}
		}
		if want.PKey != nil {
			found, err := cc.hasPKey(dir, *want.PKey)
			if err != nil {
				return unreadable("P_Key table", err)
			}
			if !found {
				return &NotReady{Port: name, Reason: ReasonPKeyMissing, Detail: fmt.Sprintf("P_Key 0x%04x not in the port's table", *want.PKey)}
			}
		}
	case discovery.LinkLayerEthernet:
		ok, err := cc.hasUsableGID(dir)
		if err != nil {
			return unreadable("GID table", err)
		}
		if !ok {
			return &NotReady{Port: name, Reason: ReasonNoGID, Detail: "no RoCE v2 GID with an IPv4 or global IPv6 address"}
		}
	}
	return nil
}

// hasPKey reports whether the port's P_Key table has an entry that serves want: its
// partition with at least the membership want asks for (sysfs.PKeyAdmits).
func (c check) hasPKey(dir string, want uint16) (bool, error) {
	table, err := sysfs.ReadPKeyTable(c.fs, dir)
	if err != nil {
		return false, err
	}
	_, found := table.Index(want)
	return found, nil
}

// hasUsableGID reports whether a RoCE port has a valid RoCE v2 entry with an IPv4-mapped
// or global IPv6 GID. A port whose netdev has no address has only link-local entries:
// rdma_cm cannot route, and NCCL's GID index points at nothing.
func (c check) hasUsableGID(dir string) (bool, error) {
	names, err := c.fs.ReadDirNames(dir + "/gid_attrs/types")
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if _, err := strconv.Atoi(n); err != nil {
			continue
		}
		typ, err := sysfs.Read(c.fs, dir+"/gid_attrs/types/"+n, sysfs.ParseGIDType)
		if err != nil || typ != sysfs.GIDTypeRoCEv2 {
			continue // unused entries fail to read
		}
		gid, err := sysfs.Read(c.fs, dir+"/gids/"+n, sysfs.ParseGID)
		if err != nil {
			continue
		}
		if gid.IsRoutable() {
			return true, nil
		}
	}
	return false, nil
}
