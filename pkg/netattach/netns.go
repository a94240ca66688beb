package netattach

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// HostNamespaces returns the real Namespaces: netlink handles bound to namespaces by
// path. hostPath names the namespace whose interfaces the driver manages; empty means
// the driver's own (/proc/self/ns/net; the kubelet plugin runs in the host's).
func HostNamespaces(hostPath string) Namespaces {
	if hostPath == "" {
		hostPath = "/proc/self/ns/net"
	}
	return kernelNamespaces{hostPath: hostPath}
}

type kernelNamespaces struct{ hostPath string }

// *netlink.Handle is a Netlink as it is; handle adds retries of interrupted dumps.
var _ Netlink = (*netlink.Handle)(nil)

func (k kernelNamespaces) Host(ctx context.Context) (Namespace, error) { return openNS(k.hostPath) }

func (k kernelNamespaces) Open(ctx context.Context, path string) (Namespace, error) {
	return openNS(path)
}

func openNS(path string) (Namespace, error) {
	fd, err := netns.GetFromPath(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNamespaceGone)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	h, err := netlink.NewHandleAt(fd, unix.NETLINK_ROUTE) // one socket: the other families cost a setns each
	if err != nil {
		_ = fd.Close()
		return nil, fmt.Errorf("netlink handle in %s: %w", path, err)
	}
	// A namespace with many links answers slowly; a stuck kernel must not hang a
	// sandbox start forever.
	if err := h.SetSocketTimeout(10 * time.Second); err != nil {
		h.Close()
		_ = fd.Close()
		return nil, fmt.Errorf("netlink socket timeout: %w", err)
	}
	return &kernelNS{h: handle{h}, fd: fd}, nil
}

type kernelNS struct {
	h  handle
	fd netns.NsHandle
}

func (n *kernelNS) Netlink() Netlink { return n.h }
func (n *kernelNS) FD() int          { return int(n.fd) }
func (n *kernelNS) ID() string       { return n.fd.UniqueId() }
func (n *kernelNS) Close() error {
	n.h.Close()
	return n.fd.Close()
}

// handle is a *netlink.Handle whose dumps are retried when the kernel interrupted them
// (the dump then may be inconsistent, and netlink returns ErrDumpInterrupted with it).
type handle struct{ *netlink.Handle }

const dumpRetries = 5

func retryDump[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpRetries {
		if v, err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

func (h handle) LinkList() ([]netlink.Link, error) { return retryDump(h.Handle.LinkList) }

func (h handle) AddrList(link netlink.Link, family int) ([]netlink.Addr, error) {
	return retryDump(func() ([]netlink.Addr, error) { return h.Handle.AddrList(link, family) })
}

func (h handle) RouteList(link netlink.Link, family int) ([]netlink.Route, error) {
	return retryDump(func() ([]netlink.Route, error) { return h.Handle.RouteList(link, family) })
}

func (h handle) RouteListFiltered(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	return retryDump(func() ([]netlink.Route, error) { return h.Handle.RouteListFiltered(family, filter, mask) })
}
