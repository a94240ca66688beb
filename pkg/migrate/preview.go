package migrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	dracel "k8s.io/dynamic-resource-allocation/cel"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Verdict is whether a plugin entry selected a port.
type Verdict int

// The verdicts; Unknown when the entry uses a selector Preview cannot evaluate.
const (
	No Verdict = iota
	Yes
	Unknown
)

// PCIFacts are the facts of PCI functions that the plugins select by and the inventory
// does not hold. SysfsPCIFacts reads them from a sysfs tree.
type PCIFacts interface {
	// Netdevs are the names below the function's net/ directory.
	Netdevs(bdf string) []string
	// VFIndex is the index of VF bdf among its PF's VFs (virtfnN).
	VFIndex(pf, bdf string) (int, bool)
	// HasVFs reports whether the PF has VFs.
	HasVFs(bdf string) bool
}

// SysfsPCIFacts reads PCIFacts below a sysfs root (bus/pci/devices/<bdf>/...).
type SysfsPCIFacts string

// Netdevs implements PCIFacts.
func (root SysfsPCIFacts) Netdevs(bdf string) []string {
	ents, err := os.ReadDir(filepath.Join(string(root), "bus/pci/devices", bdf, "net"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// VFIndex implements PCIFacts.
func (root SysfsPCIFacts) VFIndex(pf, bdf string) (int, bool) {
	links, _ := filepath.Glob(filepath.Join(string(root), "bus/pci/devices", pf, "virtfn*"))
	for _, l := range links {
		target, err := os.Readlink(l)
		if err != nil || filepath.Base(target) != bdf {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(l), "virtfn"))
		return n, err == nil
	}
	return 0, false
}

// HasVFs implements PCIFacts.
func (root SysfsPCIFacts) HasVFs(bdf string) bool {
	links, _ := filepath.Glob(filepath.Join(string(root), "bus/pci/devices", bdf, "virtfn*"))
	return len(links) > 0
}

// PreviewRow is one port: what each entry's plugin selected and what its pool selects.
type PreviewRow struct {
	Port discovery.Port
	// Old and New are per Result.Entries, in order.
	Old []Verdict
	New []bool
}

// Preview evaluates, on one node's inventory, which ports each entry selected under its
// device plugin and which its pool selects: the pool through the DeviceClass CEL the
// controller would write, on the devices the kubelet plugin would publish with cfg, the
// node configuration that the node side of the migration gives the node (NodeConfigFor).
// The ports of a legacy pool are those its device legacy-<pool> stands for, so that
// "the same ports" means the same unit.
func Preview(ctx context.Context, res *Result, inv *discovery.Inventory, facts PCIFacts, cfg nodeconfig.Config) ([]PreviewRow, error) {
	model, err := devicemodel.Build(inv, devicemodel.Options{NodeName: "preview", Config: cfg})
	if err != nil {
		return nil, err
	}
	pools := map[string]*v1alpha1.RdmaPool{}
	for i := range res.Pools {
		pools[res.Pools[i].Name] = &res.Pools[i]
	}
	// selected[entry] is the set of ports ("ibdev/port") the pool's class selects.
	selected := make([]map[string]bool, len(res.Entries))
	for i, e := range res.Entries {
		selected[i] = map[string]bool{}
		p := pools[e.Pool]
		if p == nil {
			continue
		}
		sel, err := poolSelector(model.DriverName, p)
		if err != nil {
			return nil, err
		}
		for _, pool := range model.Resources.Pools {
			for _, s := range pool.Slices {
				for _, d := range s.Devices {
					ok, _, err := sel.DeviceMatches(ctx, dracel.Device{Driver: model.DriverName, AllowMultipleAllocations: d.AllowMultipleAllocations,
						Attributes: d.Attributes, Capacity: d.Capacity})
					if err != nil {
						return nil, fmt.Errorf("pool %s on device %s: %w", p.Name, d.Name, err)
					}
					if !ok {
						continue
					}
					meta := model.Devices[d.Name]
					for _, port := range meta.AllPorts() {
						selected[i][portKey(port)] = true
					}
				}
			}
		}
	}
	var rows []PreviewRow
	for _, port := range inv.Ports {
		row := PreviewRow{Port: port}
		for i, e := range res.Entries {
			row.Old = append(row.Old, e.selects(port, facts))
			row.New = append(row.New, selected[i][portKey(port)])
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// poolSelector compiles the CEL of the pool's DeviceClass as the controller writes it.
func poolSelector(driverName string, p *v1alpha1.RdmaPool) (dracel.CompilationResult, error) {
	expr, err := controller.ClassCEL(driverName, p)
	if err != nil {
		return dracel.CompilationResult{}, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	sel, err := controller.CompileSelector(expr)
	if err != nil {
		return dracel.CompilationResult{}, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	return sel, nil
}

// NodeConfigFor is the node configuration a node runs with once the node side of res is
// rolled out over base (nodeConfig of the chart's values, empty for the defaults).
func NodeConfigFor(res *Result, values []byte) (nodeconfig.Config, error) {
	data, err := NodeConfig(values, res.LegacyResources)
	if err != nil {
		return nodeconfig.Config{}, err
	}
	return nodeconfig.Parse(data)
}

func portKey(p discovery.Port) string { return p.IBDev + "/" + strconv.Itoa(p.Port) }

// selects is the plugin's selection of the entry: a device matching any set.
func (e Entry) selects(p discovery.Port, facts PCIFacts) Verdict {
	// Both plugins list PCI network functions: a device without one (soft-RoCE) is
	// never theirs.
	if p.Virtual || p.PCIBusID == "" {
		return No
	}
	// The SR-IOV plugin does not hand out a PF whose VFs are enabled.
	if e.Plugin == PluginSRIOV && !p.SRIOVVF && facts.HasVFs(p.PCIBusID) {
		return No
	}
	if len(e.Sets) == 0 {
		return Yes
	}
	out := No
	for _, s := range e.Sets {
		switch s.matches(p, facts) {
		case Yes:
			return Yes
		case Unknown:
			out = Unknown
		}
	}
	return out
}

func (s PluginSelector) matches(p discovery.Port, facts PCIFacts) Verdict {
	anyOf := func(want []string, have ...string) bool {
		if len(want) == 0 {
			return true
		}
		for _, w := range want {
			if slices.Contains(have, w) {
				return true
			}
		}
		return false
	}
	hex := func(in []string) []string {
		out := make([]string, len(in))
		for i, v := range in {
			out[i] = selectorcheck.NormalizeHexID(v)
		}
		return out
	}
	if !anyOf(hex(s.Vendors), p.VendorID) || !anyOf(hex(s.DeviceIDs), p.DeviceID) || !anyOf(s.Drivers, p.Driver) ||
		!anyOf(s.PCIAddresses, p.PCIBusID) {
		return No
	}
	if len(s.IfNames) > 0 && !anyOf(s.IfNames, facts.Netdevs(p.PCIBusID)...) {
		return No
	}
	if len(s.LinkTypes) > 0 {
		ok := false
		for _, t := range s.LinkTypes {
			if ll, valid := v1alpha1.LinkType(t).LinkLayer(); valid && ll == p.LinkLayer {
				ok = true
			}
		}
		if !ok {
			return No
		}
	}
	pf := p.PCIBusID
	if p.SRIOVVF {
		pf = p.PhysFn
	}
	if len(s.RootDevices) > 0 && !slices.Contains(s.RootDevices, pf) {
		return No
	}
	if len(s.PFNames) > 0 && !s.pfNameMatches(p, pf, facts) {
		return No
	}
	if len(s.Unsupported) > 0 {
		return Unknown
	}
	return Yes
}

// pfNameMatches applies pfNames: the PF's netdev name, for VFs optionally with a range
// of VF indices ("ens1f0#0-3", "ens1f0#0,2-4").
func (s PluginSelector) pfNameMatches(p discovery.Port, pf string, facts PCIFacts) bool {
	names := facts.Netdevs(pf)
	for _, v := range s.PFNames {
		name, ranges, hasRange := strings.Cut(v, "#")
		if !slices.Contains(names, name) {
			continue
		}
		if !hasRange {
			return true
		}
		if !p.SRIOVVF {
			continue
		}
		idx, ok := facts.VFIndex(pf, p.PCIBusID)
		if ok && inRanges(idx, ranges) {
			return true
		}
	}
	return false
}

func inRanges(i int, ranges string) bool {
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err1 == nil && err2 == nil && a <= i && i <= b {
			return true
		}
	}
	return false
}
