package publish

import "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"

// NetnsExclusive reports whether the last scan found the node's RDMA subsystem in
// exclusive network namespace mode, where an RDMA device is visible only in the
// namespace it is assigned to.
func (p *Publisher) NetnsExclusive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inventory != nil && p.inventory.NetnsMode == discovery.NetnsModeExclusive
}
