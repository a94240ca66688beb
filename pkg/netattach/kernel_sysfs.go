package netattach

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// SysfsKernel is the RDMAKernel of a real node: GIDs are read from the host's sysfs
// (below root, through pkg/sysfs), RDMA devices are moved with RDMA netlink. The kernel
// maintains the GID table itself, so AddressAdded and AddressRemoved do nothing.
type SysfsKernel struct {
	root string
	// GIDTimeout bounds FindGID; GIDInterval paces its polls.
	GIDTimeout, GIDInterval time.Duration
	// Clock times FindGID's polls; nil is the real clock.
	Clock clock.Clock
}

var _ RDMAKernel = (*SysfsKernel)(nil)

// NewSysfsKernel returns the real RDMA kernel reading sysfs below root ("/sys" on a node).
func NewSysfsKernel(root string) *SysfsKernel {
	return &SysfsKernel{root: root, GIDTimeout: defaultGIDTimeout, GIDInterval: defaultGIDInterval}
}

// MoveDevice moves ibdev from the driver's namespace into the namespace of netnsFD
// (`rdma dev set <ibdev> netns <ns>`); the kernel must be in exclusive RDMA netns mode.
func (k *SysfsKernel) MoveDevice(ctx context.Context, ibdev string, netnsFD int) error {
	link, err := netlink.RdmaLinkByName(ibdev)
	if err != nil {
		return fmt.Errorf("look up RDMA device %s: %w", ibdev, err)
	}
	if err := netlink.RdmaLinkSetNsFd(link, uint32(netnsFD)); err != nil {
		return fmt.Errorf("move RDMA device %s: %w", ibdev, err)
	}
	klog.FromContext(ctx).V(2).Info("Moved RDMA device into the pod", "ibdev", ibdev)
	return nil
}

// ReturnDevice moves ibdev from the pod's namespace back into the host's. When the
// pod's namespace is gone (podNetnsFD < 0) the kernel returns the device by itself, a
// little later: it waits for the device to appear in the host.
func (k *SysfsKernel) ReturnDevice(ctx context.Context, ibdev string, podNetnsFD, hostNetnsFD int) error {
	if podNetnsFD >= 0 {
		h, err := netlink.NewHandleAt(netns.NsHandle(podNetnsFD), unix.NETLINK_RDMA)
		if err != nil {
			return fmt.Errorf("RDMA netlink in the pod: %w", err)
		}
		defer h.Close()
		if link, err := h.RdmaLinkByName(ibdev); err == nil {
			if err := h.RdmaLinkSetNsFd(link, uint32(hostNetnsFD)); err != nil {
				return fmt.Errorf("move RDMA device %s back: %w", ibdev, err)
			}
			klog.FromContext(ctx).V(2).Info("Returned RDMA device to the host", "ibdev", ibdev)
			return nil
		}
	}
	deadline := time.Now().Add(defaultReturnTimeout)
	for {
		if _, err := netlink.RdmaLinkByName(ibdev); err == nil {
			return nil
		} else if !time.Now().Before(deadline) {
			return fmt.Errorf("RDMA device %s is neither in the pod nor in the host: %w", ibdev, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// AddressAdded does nothing: the kernel adds the GID itself.
func (k *SysfsKernel) AddressAdded(context.Context, string, int, string, netip.Addr) error {
	return nil
}

// AddressRemoved does nothing: the kernel removes the GID itself.
func (k *SysfsKernel) AddressRemoved(context.Context, string, int, string, netip.Addr) error {
	return nil
}

// FindGID polls the GID table for the RoCE v2 entry of addr on ndev.
func (k *SysfsKernel) FindGID(ctx context.Context, ibdev string, port int, ndev string, addr netip.Addr) (int, error) {
	return pollGID(ctx, k.Clock, k.root, ibdev, port, ndev, addr, k.GIDTimeout, k.GIDInterval)
}
