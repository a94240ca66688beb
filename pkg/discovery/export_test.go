package discovery

// Internals for the external tests (package discovery_test). Those tests build their
// nodes with pkg/mocknode, which imports this package for its expectations
// (mocknode.Node.ExpectedPorts), so they cannot be part of it.

// NetnsModeFile is the module parameter file the netns mode is read from.
const NetnsModeFile = netnsModeFile

// SetNetnsFromNetlink replaces d's netlink query of the netns mode.
func SetNetnsFromNetlink(d *Discoverer, f func() (string, error)) { d.netnsFromNetlink = f }
