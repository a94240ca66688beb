package mocknode

import (
	"fmt"
	"path"
	"regexp"
	"slices"
)

// modaliasRE is a CPU modalias as the kernel writes it on the architectures the mock
// offers (CPU_FEATURE_TYPEFMT of x86; arm64's ELF platform).
var modaliasRE = regexp.MustCompile(`^cpu:type:(x86,ven[0-9A-F]{4}fam[0-9A-F]{4}mod[0-9A-F]{4}|aarch64):feature:(,[0-9A-F]{4})*$`)

// validatePlatform checks the platform against the paths of the node: every NUMA node a
// function or GPU names is a socket's, the functions of one root complex agree on their
// NUMA node (their bridges have one), a bridge sits at one place only, and every bridge
// is a root port, a switch port or listed, with IDs and a link.
func (n *Node) validatePlatform() []error {
	p := n.Platform
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("platform: "+format, args...)) }
	if !modaliasRE.MatchString(p.CPU.Modalias) {
		add("cpu modalias %q, want cpu:type:x86,ven<4 hex>fam<4 hex>mod<4 hex>:feature:... or cpu:type:aarch64:feature:..., upper-case hex", p.CPU.Modalias)
	}
	if p.CPU.Cores < 1 || !slices.Contains([]int{1, 2, 4}, p.CPU.Threads) {
		add("cpu of %d cores and %d threads a core, want 1 or more cores of 1, 2 or 4 threads", p.CPU.Cores, p.CPU.Threads)
	}
	if p.Sockets < 1 {
		add("%d sockets, want 1 or more", p.Sockets)
	}
	devices := map[string]bool{}
	for _, f := range n.PCIFunctions {
		devices[f.Address] = true
	}
	for _, g := range n.GPUs {
		devices[g.Address] = true
	}
	listed := map[string]bool{}
	for _, b := range p.Bridges {
		listed[b.Address] = true
	}
	places := map[string]string{} // bridge -> the path above it
	roots := map[string]pciPath{}
	var rootPort, switchPort string // a bridge that needs the model, for the error
	for _, pp := range n.pciPaths() {
		if pp.numa >= max(p.Sockets, 1) {
			add("%s: numa node %d, but the platform has NUMA nodes 0 to %d, one per socket", pp.owner, pp.numa, p.Sockets-1)
		}
		if first, ok := roots[pp.root]; !ok {
			roots[pp.root] = pp
		} else if first.numa != pp.numa {
			add("%s: numa node %d, but %s below the same root %s has %d: a root complex's bridges have one", pp.owner, pp.numa, first.owner, pp.root, first.numa)
		}
		for i, b := range pp.bridges {
			above := path.Join(append([]string{pp.root}, pp.bridges[:i]...)...)
			if prev, ok := places[b]; !ok {
				places[b] = above
			} else if prev != above {
				add("%s: bridge %s below %s, but elsewhere below %s", pp.owner, b, above, prev)
			}
			switch {
			case devices[b]:
				add("%s: bridge %s is also a function or GPU", pp.owner, b)
			case listed[b]:
			case i == 0:
				rootPort = b
			default:
				switchPort = b
			}
		}
	}
	if rootPort != "" && p.CPU.RootPort == (BridgeModel{}) {
		add("bridge %s is a root port, and the cpu names no root port", rootPort)
	}
	if switchPort != "" && p.Switch == (BridgeModel{}) {
		add("bridge %s is a switch port, and the platform names no switch", switchPort)
	}
	check := func(what string, m BridgeModel) {
		if m.Vendor == 0 || m.Vendor == 0xffff {
			add("%s: vendor 0x%04x is no vendor", what, m.Vendor)
		}
		if err := validateLink(m.Link); err != nil {
			add("%s: link: %w", what, err)
		}
	}
	if p.CPU.RootPort != (BridgeModel{}) {
		check("cpu root port", p.CPU.RootPort)
	}
	if p.Switch != (BridgeModel{}) {
		check("switch", p.Switch)
	}
	seen := map[string]bool{}
	for _, b := range p.Bridges {
		switch {
		case seen[b.Address]:
			add("bridge %s listed twice", b.Address)
		case places[b.Address] == "":
			add("bridge %s is on the path of no function or GPU", b.Address)
		}
		seen[b.Address] = true
		check("bridge "+b.Address, b.BridgeModel)
	}
	return errs
}
