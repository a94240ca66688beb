// Package porttable reads the live tables of a port that a claim's fabric settings are
// looked up in when the claim is prepared: the P_Key table (NCCL_IB_PKEY is an index
// into it) and the GID table (the GID index of a RoCE version and address family).
//
// The tables change without the port's published device changing (the subnet manager
// rewrites P_Keys, an address added to a netdev adds GID entries), so each call reads
// the tree below the sysfs root as it is now, through pkg/sysfs and pkg/discovery's
// reader of the GID table; nothing is cached and nothing is written.
package porttable

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Reader reads port tables below a sysfs root. It is safe for concurrent use.
type Reader struct {
	root string
}

// New returns a Reader of the sysfs tree at root: the node's /sys, or a mock tree.
func New(root string) *Reader {
	return &Reader{root: root}
}

// portDir returns the port's directory below the root, after checking that the names
// make a path below class/infiniband and nothing else.
func portDir(ibdev string, port int) (string, error) {
	if _, err := sysfs.ParseDeviceName(ibdev); err != nil {
		return "", err
	}
	if port < 1 {
		return "", fmt.Errorf("port %d of %s: ports are numbered from 1", port, ibdev)
	}
	return "class/infiniband/" + ibdev + "/ports/" + strconv.Itoa(port), nil
}

// PKeyTable returns the used entries of the P_Key table of port of ibdev.
func (r *Reader) PKeyTable(ibdev string, port int) (sysfs.PKeyTable, error) {
	dir, err := portDir(ibdev, port)
	if err != nil {
		return nil, fmt.Errorf("read P_Key table: %w", err)
	}
	f, err := sysfs.Open(r.root) // a new FS per read: an FS caches listings
	if err != nil {
		return nil, fmt.Errorf("read P_Key table: %w", err)
	}
	t, err := sysfs.ReadPKeyTable(f, dir)
	if err != nil {
		return nil, fmt.Errorf("read P_Key table of port %s/%d: %w", ibdev, port, err)
	}
	return t, nil
}

// GIDIndex returns the index of the GID entry of port of ibdev that NCCL should use for
// RoCE version roceVersion (1 or 2) and address family family: the lowest entry of that
// type whose GID is routable (sysfs.GID.IsRoutable: never zero, never link-local) and of
// that family (IPv4-mapped for ipv4, global IPv6 for ipv6). It is the GID index rule of
// sysfs.md with the version and family fixed instead of preferred. A port without such
// an entry is an error that lists the entries it has.
func (r *Reader) GIDIndex(ibdev string, port int, roceVersion int, family v1alpha1.AddressFamily) (int, error) {
	if _, err := portDir(ibdev, port); err != nil {
		return 0, fmt.Errorf("read GID table: %w", err)
	}
	var typ sysfs.GIDType
	switch roceVersion {
	case 1:
		typ = sysfs.GIDTypeRoCEv1
	case 2:
		typ = sysfs.GIDTypeRoCEv2
	default:
		return 0, fmt.Errorf("RoCE version %d: want 1 or 2", roceVersion)
	}
	var ofFamily func(sysfs.GID) bool
	switch family {
	case v1alpha1.AddressFamilyIPv4:
		ofFamily = sysfs.GID.IsIPv4Mapped
	case v1alpha1.AddressFamilyIPv6:
		ofFamily = sysfs.GID.IsGlobalIPv6
	default:
		return 0, fmt.Errorf("address family %q: want ipv4 or ipv6", family)
	}
	t, err := discovery.ReadGIDTable(r.root, ibdev, port)
	if err != nil {
		return 0, err
	}
	for _, e := range t.Entries {
		if e.Type == typ && e.GID.IsRoutable() && ofFamily(e.GID) {
			return e.Index, nil
		}
	}
	return 0, fmt.Errorf("port %s/%d has no %s GID entry with %s address; its entries: %s",
		ibdev, port, typ, familyWords(family), entriesString(t.Entries))
}

func familyWords(f v1alpha1.AddressFamily) string {
	if f == v1alpha1.AddressFamilyIPv6 {
		return "a global IPv6"
	}
	return "an IPv4"
}

// entriesString writes a GID table for an error: "[0] fe80::1 (RoCE v2), ...", or
// "none" when the table has no valid entry (the netdev has no address or is down).
func entriesString(entries []discovery.GIDEntry) string {
	if len(entries) == 0 {
		return "none"
	}
	parts := make([]string, len(entries))
	for i, e := range entries {
		typ := string(e.Type)
		if typ == "" {
			typ = "type unreadable"
		}
		parts[i] = fmt.Sprintf("[%d] %s (%s)", e.Index, e.GID.Addr(), typ)
	}
	return strings.Join(parts, ", ")
}
