package bench

import (
	"fmt"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// largePFs is the number of physical ports of the large profile; beyond it come its VFs.
const largePFs = 64

// scaledNode returns a mock node with the first n ports of the large profile: n ≤ 64
// takes the first n single-port cards (InfiniBand first, then RoCE PFs, without their
// VFs); n = 320 is the whole profile with its 256 VFs. Every port is ACTIVE, so the
// nodes differ only in size.
func scaledNode(n int) (*mocknode.Node, error) {
	prof, err := mocknode.Lookup("large")
	if err != nil {
		return nil, err
	}
	full := prof.Node()
	if n == len(full.RDMADevices) {
		return full, nil
	}
	if n < 1 || n > largePFs {
		return nil, fmt.Errorf("scaled node: %d ports, want 1..%d or %d", n, largePFs, len(full.RDMADevices))
	}
	keep := map[string]bool{}
	out := &mocknode.Node{NetnsMode: full.NetnsMode}
	for _, d := range full.RDMADevices[:n] {
		keep[d.PCI] = true
		out.RDMADevices = append(out.RDMADevices, d)
	}
	for _, f := range full.PCIFunctions {
		if keep[f.Address] {
			out.PCIFunctions = append(out.PCIFunctions, f)
		}
	}
	for _, nd := range full.Netdevs {
		if keep[nd.PCI] {
			out.Netdevs = append(out.Netdevs, nd)
		}
	}
	return out, nil
}

// writeScaledNode writes scaledNode(n) below dir and returns its sysfs root.
func writeScaledNode(dir string, n int) (string, error) {
	node, err := scaledNode(n)
	if err != nil {
		return "", err
	}
	if err := node.Write(dir, mocknode.WriteOptions{Overwrite: true}); err != nil {
		return "", fmt.Errorf("write %d-port node: %w", n, err)
	}
	return dir + "/" + mocknode.SysDir, nil
}
