package discovery

import (
	"github.com/vishvananda/netlink"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// netnsModeFile is ib_core's module parameter: Y shared, N exclusive.
const netnsModeFile = "module/ib_core/parameters/netns_mode"

// netlinkNetnsMode asks the kernel's RDMA netlink family ("rdma system show netns").
func netlinkNetnsMode() (string, error) { return netlink.RdmaSystemGetNetnsMode() }

// netnsMode returns the node's RDMA netns mode: from netlink when asked and available,
// else from the module parameter file, else unknown.
func (s *scan) netnsMode() NetnsMode {
	if s.d.opts.UseNetlink {
		mode, err := s.d.netnsFromNetlink()
		switch {
		case err != nil:
			// Hosts without the RDMA netlink family (no ib_core, old kernels) are normal.
			if s.d.firstReport("netlink netns mode\x00" + err.Error()) {
				s.logger.V(2).Info("RDMA netlink unavailable, reading the netns mode from sysfs", "err", err)
			}
		case mode == string(NetnsModeShared) || mode == string(NetnsModeExclusive):
			return NetnsMode(mode)
		default:
			if s.d.firstReport("netlink netns mode\x00" + mode) {
				s.logger.Info("RDMA netlink reported an unknown netns mode, reading sysfs instead", "mode", mode)
			}
		}
	}
	shared, err := sysfs.Read(s.fs, netnsModeFile, sysfs.ParseNetnsMode)
	if err != nil {
		s.unknown("RDMA netns mode", err)
		return NetnsModeUnknown
	}
	if shared {
		return NetnsModeShared
	}
	return NetnsModeExclusive
}
