package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// ClusterOptions tune ClusterPreview.
type ClusterOptions struct {
	// DriverName is the driver whose ResourceSlices are read; default
	// devicemodel.DefaultDriverName.
	DriverName string
	// NodeSelector limits the nodes compared, in kubectl's -l syntax; empty: every node.
	NodeSelector string
}

// ClusterPreview compares, node by node, what the running device plugin advertises with
// what the pools would serve from the ResourceSlices the driver publishes for the node.
// It only reads: the nodes and the ResourceSlices; the pools need not exist, their
// DeviceClass CEL is evaluated here as the controller would write it.
//
// The plugin's side is the node's status: the capacity of each resource (allocatable
// too, when it differs: unhealthy devices). The pool's side is, for an exclusive pool,
// the devices its class selects, one unit each; for a legacy pool its device
// legacy-<pool>: its rdma.dra.io/shares capacity (maxPods) against the plugin's units
// (rdmaHcaMax), and its rdma.dra.io/ports against the ports the entry's selectors match
// among the node's port devices, when the node publishes port devices.
//
// A node that advertises none of the resources and has no slice of the driver is left
// out. Findings are sorted by node, then resource.
func ClusterPreview(ctx context.Context, res *Result, kube kubernetes.Interface, opts ClusterOptions) ([]Finding, error) {
	driver := opts.DriverName
	if driver == "" {
		driver = devicemodel.DefaultDriverName
	}
	sel, err := labels.Parse(opts.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("node selector %q: %w", opts.NodeSelector, err)
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	slicesList, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	devices := nodeDevices(slicesList.Items, driver)
	pools := map[string]*v1alpha1.RdmaPool{}
	for i := range res.Pools {
		pools[res.Pools[i].Name] = &res.Pools[i]
	}
	selectors := make([]*dracel.CompilationResult, len(res.Entries))
	for i, e := range res.Entries {
		if p := pools[e.Pool]; p != nil {
			s, err := poolSelector(driver, p)
			if err != nil {
				return nil, err
			}
			selectors[i] = &s
		}
	}
	var out []Finding
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if !sel.Matches(labels.Set(node.Labels)) { // fake clients do not filter
			continue
		}
		devs := devices[node.Name]
		advertises := slices.ContainsFunc(res.Entries, func(e Entry) bool {
			_, ok := node.Status.Capacity[corev1.ResourceName(e.Resource)]
			return ok
		})
		if len(devs) == 0 && !advertises {
			continue
		}
		n := &clusterNode{node: node, driver: driver, devices: devs}
		for i, e := range res.Entries {
			if selectors[i] == nil {
				continue
			}
			f, err := n.compare(ctx, e, *selectors[i])
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	sortFindings(out)
	return out, nil
}

// nodeDevices returns the devices of the driver per node, from the newest generation of
// each of its pools: an older generation is what the plugin is replacing.
func nodeDevices(items []resourceapi.ResourceSlice, driver string) map[string][]resourceapi.Device {
	newest := map[string]int64{}
	for _, s := range items {
		if s.Spec.Driver == driver {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	out := map[string][]resourceapi.Device{}
	for _, s := range items {
		if s.Spec.Driver != driver || s.Spec.NodeName == nil || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		out[*s.Spec.NodeName] = append(out[*s.Spec.NodeName], s.Spec.Devices...)
	}
	return out
}

// clusterNode is one node under comparison.
type clusterNode struct {
	node    *corev1.Node
	driver  string
	devices []resourceapi.Device
}

// compare makes the finding of entry e on the node; sel is the CEL of e's pool.
func (n *clusterNode) compare(ctx context.Context, e Entry, sel dracel.CompilationResult) (Finding, error) {
	f := Finding{Node: n.node.Name, Resource: e.Resource, Pool: e.Pool}
	name := corev1.ResourceName(e.Resource)
	capacity, registered := n.node.Status.Capacity[name]
	units := capacity.Value()
	f.PluginSide = "none"
	if registered {
		f.PluginSide = fmt.Sprintf("%d units", units)
		if a, ok := n.node.Status.Allocatable[name]; ok && a.Value() != units {
			f.PluginSide += fmt.Sprintf(" (%d allocatable)", a.Value())
		}
	}
	var matched []*resourceapi.Device
	for i := range n.devices {
		d := &n.devices[i]
		ok, _, err := sel.DeviceMatches(ctx, dracel.Device{Driver: n.driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
			Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil {
			return f, fmt.Errorf("pool %s on node %s, device %s: %w", e.Pool, n.node.Name, d.Name, err)
		}
		if ok {
			matched = append(matched, d)
		}
	}
	none := "no device of the node's ResourceSlices matches the pool"
	if len(n.devices) == 0 {
		none = "the driver publishes no ResourceSlice for this node (is its kubelet plugin running there?)"
	}
	if e.Legacy() {
		n.compareLegacy(&f, e, units, matched, none)
		return f, nil
	}
	// One unit is one RDMA device: an exclusive allocation of one of its ports keeps
	// its other ports from anyone else, as a VF or PF was one unit of the plugin.
	rdmaDevices := map[string]bool{}
	for _, d := range matched {
		name := d.Name
		if a, ok := devicemodel.LookupAttribute(n.driver, d, devicemodel.AttrIBDev); ok && a.StringValue != nil {
			name = *a.StringValue
		}
		rdmaDevices[name] = true
	}
	m := int64(len(rdmaDevices))
	f.PoolSide = fmt.Sprintf("%d devices", m)
	switch {
	case units > 0 && m == 0:
		f.Diff, f.Detail = DiffMissing, none
	case m > units && units == 0:
		f.Diff, f.Detail = DiffWider, fmt.Sprintf("the device plugin advertises no %s here and the pool would serve %d", e.Resource, m)
	case m > units:
		f.Diff, f.Detail = DiffWider, fmt.Sprintf("the pool would serve %d devices where the device plugin advertised %d", m, units)
	case m < units:
		f.Diff, f.Detail = DiffNarrower, fmt.Sprintf("the pool would serve %d devices where the device plugin advertised %d", m, units)
	case m == 0:
		f.Diff = DiffAbsent
	default:
		f.Diff, f.Detail = DiffSame, "same units"
	}
	return f, nil
}

// compareLegacy compares a legacy pool's device with the plugin's units and ports.
func (n *clusterNode) compareLegacy(f *Finding, e Entry, units int64, matched []*resourceapi.Device, none string) {
	pluginPorts, perPort := n.pluginPorts(e)
	if perPort && f.PluginSide != "none" {
		f.PluginSide += fmt.Sprintf(" of %d ports", pluginPorts)
	}
	var dev *resourceapi.Device
	for _, d := range matched {
		if d.Name == v1alpha1.LegacyDeviceName(e.Pool) {
			dev = d
		}
	}
	if dev == nil {
		f.PoolSide = "none"
		switch {
		case units > 0 && len(n.devices) > 0:
			f.Diff, f.Detail = DiffMissing, fmt.Sprintf("no device %s in the node's ResourceSlices (is the entry in the node configuration's legacyResources?)", v1alpha1.LegacyDeviceName(e.Pool))
		case units > 0:
			f.Diff, f.Detail = DiffMissing, none
		default:
			f.Diff = DiffAbsent
		}
		return
	}
	shares := int64(0)
	if c, ok := dev.Capacity[devicemodel.SharesCapacity]; ok {
		shares = c.Value.Value()
	}
	ports := int64(0)
	if a, ok := devicemodel.LookupAttribute(n.driver, dev, devicemodel.AttrPorts); ok && a.IntValue != nil {
		ports = *a.IntValue
	}
	f.PoolSide = fmt.Sprintf("%d units of %d ports", shares, ports)
	if units == 0 {
		f.Diff, f.Detail = DiffWider, fmt.Sprintf("the device plugin advertises no %s here and the pool would serve %d units of %d ports", e.Resource, shares, ports)
		return
	}
	var wider, narrower []string
	switch {
	case shares > units:
		wider = append(wider, fmt.Sprintf("%d pods may hold it where the device plugin allowed %d (maxPods against rdmaHcaMax)", shares, units))
	case shares < units:
		narrower = append(narrower, fmt.Sprintf("%d pods may hold it where the device plugin allowed %d (maxPods against rdmaHcaMax)", shares, units))
	}
	if perPort {
		switch {
		case ports > int64(pluginPorts):
			wider = append(wider, fmt.Sprintf("a unit is %d ports where the entry's selectors match %d", ports, pluginPorts))
		case ports < int64(pluginPorts):
			narrower = append(narrower, fmt.Sprintf("a unit is %d ports where the entry's selectors match %d", ports, pluginPorts))
		}
	}
	switch {
	case len(wider) > 0:
		f.Diff, f.Detail = DiffWider, strings.Join(append(wider, narrower...), "; ")
	case len(narrower) > 0:
		f.Diff, f.Detail = DiffNarrower, strings.Join(narrower, "; ")
	case perPort:
		f.Diff, f.Detail = DiffSame, "same units, of as many ports"
	default:
		f.Diff, f.Detail = DiffSame, "same units (the node publishes no port devices to count the entry's ports on)"
	}
}

// pluginPorts counts the ports the plugin's entry selects among the node's port devices
// (those of mode exclusive or shared, one port each), as Preview emulates the plugin on
// a node's inventory. perPort is false when the node publishes no port device.
func (n *clusterNode) pluginPorts(e Entry) (count int, perPort bool) {
	ports := map[string]discovery.Port{}
	netdevs := map[string][]string{} // PCI address -> netdevs, for ifNames
	for i := range n.devices {
		d := &n.devices[i]
		p, ok := n.port(d)
		if !ok {
			continue
		}
		key := portKey(p)
		if _, seen := ports[key]; !seen && p.PCIBusID != "" && p.Netdev != "" {
			netdevs[p.PCIBusID] = append(netdevs[p.PCIBusID], p.Netdev)
		}
		ports[key] = p
	}
	facts := attributeFacts(netdevs)
	for _, p := range ports {
		if e.selects(p, facts) == Yes {
			count++
		}
	}
	return count, len(ports) > 0
}

// port reads the port a port device stands for from its attributes; false for a legacy
// device or one without a port.
func (n *clusterNode) port(d *resourceapi.Device) (discovery.Port, bool) {
	str := func(name resourceapi.QualifiedName) string {
		if a, ok := devicemodel.LookupAttribute(n.driver, d, name); ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	if m := str(devicemodel.AttrMode); m != string(devicemodel.ModeExclusive) && m != string(devicemodel.ModeShared) {
		return discovery.Port{}, false
	}
	p := discovery.Port{IBDev: str(devicemodel.AttrIBDev), VendorID: str(devicemodel.AttrVendorID), DeviceID: str(devicemodel.AttrDeviceID),
		Driver: str(devicemodel.AttrDriver), Netdev: str(devicemodel.AttrNetdev), LinkLayer: str(devicemodel.AttrLinkLayer),
		PCIBusID: str(deviceattribute.StandardDeviceAttributePCIBusID)}
	if a, ok := devicemodel.LookupAttribute(n.driver, d, devicemodel.AttrPort); ok && a.IntValue != nil {
		p.Port = int(*a.IntValue)
	}
	if a, ok := devicemodel.LookupAttribute(n.driver, d, devicemodel.AttrSRIOVVF); ok && a.BoolValue != nil {
		p.SRIOVVF = *a.BoolValue
	}
	return p, p.IBDev != "" && p.Port > 0
}

// attributeFacts are the PCI facts a node's published devices tell: the netdevs of each
// PCI function (those of its ports; a bonded port shows the bond, where the plugin saw
// the function's own interface). Nothing about VFs: the shared-dev-plugin, whose entries
// legacy pools replace, does not select by them.
type attributeFacts map[string][]string

// Netdevs implements PCIFacts.
func (f attributeFacts) Netdevs(bdf string) []string { return f[bdf] }

// VFIndex implements PCIFacts.
func (attributeFacts) VFIndex(string, string) (int, bool) { return 0, false }

// HasVFs implements PCIFacts.
func (attributeFacts) HasVFs(string) bool { return false }
