// Package migrate converts the configuration of the device plugins this driver
// replaces (k8s-rdma-shared-dev-plugin, sriov-network-device-plugin with isRdma) into
// RdmaPools and the node configuration they need, and proves the result against a node
// or a cluster before anyone switches.
//
// Invariant: a pool never selects a port the plugin's entry did not select, unless the
// user accepted that widening by name (Options.AllowWidening, Options.AllowWider).
// Anything that cannot be expressed exactly and would widen the selection (an invalid
// selector value, a narrowing selector without equivalent, a selector field this
// package does not know) is a Problem naming the entry and the field. So is whatever the
// plugin itself refused or that would change what pods get (a duplicate resource name,
// an rdmaHcaMax without units). Notes are kept for what cannot surprise.
//
// The unit is kept: a k8s-rdma-shared-dev-plugin resource becomes a legacy pool and a
// node configuration legacyResources entry (one unit, every port the entry selects on
// the node, rdmaHcaMax pods at once); an SR-IOV resource becomes an exclusive pool (one
// unit, one device).
package migrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Options tune a conversion.
type Options struct {
	// ResourcePrefix is the prefix of entries without resourcePrefix; empty means the
	// plugin's own default (SharedDevicePluginPrefix or SRIOVDevicePluginPrefix, which
	// is also what the Network Operator runs the SR-IOV plugin with).
	ResourcePrefix string
	// InputName is the input's file name; a name ending .json is read as JSON only,
	// .yaml or .yml as YAML, anything else (stdin) as JSON when it starts with { or [.
	InputName string
	// AllowWidening accepts named widenings, each "<resourceName>:<field>" as a Problem's
	// WideningKey spells it. Each accepted widening becomes a note starting "WIDENED".
	AllowWidening []string
	// AllowWider accepts the widenings a dry run finds, per extended resource name
	// (rdma/hca_shared_devices_a): the pool selects more on a node than the plugin did.
	AllowWider []string
}

func (o Options) allows(key string) bool { return slices.Contains(o.AllowWidening, key) }

// The flags that accept a widening, named in the problems.
const (
	FlagAllowWidening = "--allow-widening"
	FlagAllowWider    = "--allow-wider"
)

// Problem is something the conversion cannot do without changing what the entry
// selected, or a conflict with what already exists. The CLI prints every problem and
// exits non-zero; nothing is written.
type Problem struct {
	// Entry names the input entry: configList[0] (hca_shared_devices_a).
	Entry string
	// Field is the field path inside the entry: selectors.vendors.
	Field string
	// Message says what is wrong and what to do.
	Message string
	// WideningKey is the value of Flag that accepts this problem, which is then a
	// widening; empty when no flag can accept it.
	WideningKey string
	// Flag is the flag that takes WideningKey: FlagAllowWidening when empty.
	Flag string
}

// Widens reports whether the problem is a widening the user may accept by name.
func (p Problem) Widens() bool { return p.WideningKey != "" }

func (p Problem) flag() string {
	if p.Flag == "" {
		return FlagAllowWidening
	}
	return p.Flag
}

// String is the one-line form the CLI prints.
func (p Problem) String() string {
	s := p.Entry
	if p.Field != "" {
		s += ": " + p.Field
	}
	s += ": " + p.Message
	if p.WideningKey != "" {
		s += fmt.Sprintf(" (to accept, pass %s %s)", p.flag(), p.WideningKey)
	}
	return s
}

// Result is the pools a configuration becomes and what the user must know about them.
type Result struct {
	Pools []v1alpha1.RdmaPool
	// LegacyResources are the node configuration's entries the legacy pools need, one
	// per legacy pool, of the same name.
	LegacyResources []nodeconfig.LegacyResource
	// Notes are the differences, one sentence each, in input order.
	Notes []string
	// Problems are the widenings not accepted and the conflicts; the pools must not be
	// applied while there are any.
	Problems []Problem
	// Entries are the converted entries with the plugin's own selection, for Preview.
	Entries []Entry
	// Accepted are the widening keys of Options.AllowWidening and Options.AllowWider that
	// accepted a widening.
	Accepted []string
}

// Entry is one converted plugin entry: the resource, the pool that replaces it and what
// the plugin selected, as Preview evaluates it.
type Entry struct {
	// Plugin is PluginShared or PluginSRIOV.
	Plugin string
	// Resource is the extended resource name: rdma/hca_shared_devices_a.
	Resource string
	// Pool is the RdmaPool's name; empty when the entry produced no pool.
	Pool string
	// MaxPods is the entry's rdmaHcaMax: how many units the plugin advertised per node
	// (k8s-rdma-shared-dev-plugin only).
	MaxPods int
	// Sets are the plugin's selector sets; a device matching any set is selected.
	Sets []PluginSelector
}

// Legacy reports whether the entry's pool is a legacy pool: one unit is every port the
// entry selects on the node.
func (e Entry) Legacy() bool { return e.Plugin == PluginShared }

// The plugins Entry.Plugin names.
const (
	PluginShared = "k8s-rdma-shared-dev-plugin"
	PluginSRIOV  = "sriov-network-device-plugin"
)

// PluginSelector is one selector set as the plugin evaluates it: every non-empty field
// must match, any value of a field may match.
type PluginSelector struct {
	Vendors, DeviceIDs, Drivers []string
	// IfNames are the names of the PCI function's netdevs (shared-dev-plugin ifNames
	// and devices).
	IfNames []string
	// PFNames are the PF's netdev names, possibly with VF ranges (pfNames).
	PFNames []string
	// RootDevices are PF PCI addresses (rootDevices).
	RootDevices  []string
	PCIAddresses []string
	LinkTypes    []string
	// Unsupported lists set fields that Preview cannot evaluate; the plugin's selection
	// is then unknown.
	Unsupported []string
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *Result) problem(entry, field, key, format string, args ...any) {
	r.Problems = append(r.Problems, Problem{Entry: entry, Field: field, WideningKey: key, Message: fmt.Sprintf(format, args...)})
}

// widen records a widening: a note when the user accepted key, a problem otherwise.
func (r *Result) widen(opts Options, entry, resourceName, field, what, accepted string) {
	key := resourceName + ":" + strings.TrimPrefix(field, "selectors.")
	if opts.allows(key) {
		r.Accepted = append(r.Accepted, key)
		r.note("WIDENED %s: %s: %s; accepted by %s %s: %s", entry, field, what, FlagAllowWidening, key, accepted)
		return
	}
	r.problem(entry, field, key, "%s", what)
}

var invalidName = regexp.MustCompile(`[^a-z0-9]+`)

// poolName turns a resource name (hca_shared_devices_a) into a pool name
// (hca-shared-devices-a), unique among taken. It is a DNS label short enough to name a
// legacy pool, whose node device is legacy-<name>.
func poolName(resourceName string, taken map[string]bool) string {
	// Every run of other characters becomes one '-': the result is a DNS label.
	name := strings.Trim(invalidName.ReplaceAllString(strings.ToLower(resourceName), "-"), "-")
	if name == "" {
		name = "rdma-pool"
	}
	base := name
	for i := 1; ; i++ {
		suffix := ""
		if i > 1 {
			suffix = fmt.Sprintf("-%d", i)
		}
		name = base
		if len(name)+len(suffix) > nodeconfig.MaxLegacyResourceNameLength {
			name = strings.TrimRight(name[:nodeconfig.MaxLegacyResourceNameLength-len(suffix)], "-")
		}
		name += suffix
		if !taken[name] {
			break
		}
	}
	taken[name] = true
	return name
}

func newPool(name string, mode v1alpha1.PoolMode, extendedResourceName string) v1alpha1.RdmaPool {
	p := v1alpha1.RdmaPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.RdmaPoolKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.RdmaPoolSpec{Mode: mode},
	}
	if extendedResourceName != "" {
		p.Spec.ExtendedResourceName = &extendedResourceName
	}
	return p
}

// entryConverter converts the values of one entry, recording widenings.
type entryConverter struct {
	res          *Result
	opts         Options
	entry        string // configList[0] (hca_shared_devices_a)
	resourceName string // hca_shared_devices_a
}

// values keeps the values of a selector list that valid accepts. A value it refuses
// matched no device under the plugin; dropping it widens the selection when it was the
// list's only value (no selector: every device) and changes nothing otherwise, but the
// user may have meant another value, so either way it needs acceptance.
func (c *entryConverter) values(in []string, field, want string, valid func(string) bool) []string {
	var out, bad []string
	for _, v := range in {
		if valid(v) {
			out = append(out, v)
		} else {
			bad = append(bad, v)
		}
	}
	if len(bad) == 0 {
		return out
	}
	what := fmt.Sprintf("%s %s not %s; the plugin matched no device by %s", quoteList(bad), isAre(bad), want, itThem(bad))
	accepted := "the values were dropped"
	if len(out) == 0 {
		what += ", so this entry selected nothing, while a pool without this selector selects every port"
		accepted = fmt.Sprintf("the pool has no %s selector and selects ports of any %s", field, strings.TrimPrefix(field, "selectors."))
	}
	c.res.widen(c.opts, c.entry, c.resourceName, field, what, accepted)
	return out
}

// dropped records a set selector without equivalent: without it the pool selects more.
func (c *entryConverter) dropped(field string, what string) {
	c.res.widen(c.opts, c.entry, c.resourceName, field, what, "the pool does not select by "+strings.TrimPrefix(field, "selectors.")+" and may select more ports than the plugin did")
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

func isAre(vs []string) string {
	if len(vs) == 1 {
		return "is"
	}
	return "are"
}

func itThem(vs []string) string {
	if len(vs) == 1 {
		return "it"
	}
	return "them"
}

func validHexID(v string) bool {
	n := selectorcheck.NormalizeHexID(v)
	return len(n) == 4 && strings.Trim(n, "0123456789abcdef") == ""
}

// pluginLinkLayer reads a device plugin's link type, whatever its case (an RdmaPool
// takes only the spellings of v1alpha1.LinkTypes).
func pluginLinkLayer(v string) (string, bool) {
	return v1alpha1.LinkType(strings.ToLower(v)).LinkLayer()
}

func validLinkType(v string) bool {
	_, ok := pluginLinkLayer(v)
	return ok
}

// toLinkTypes keeps each link type as the device plugin spelled it when an RdmaPool takes
// that spelling, and writes the link layer's own name (InfiniBand, Ethernet) for the
// others ("Infiniband", "ETHER"), which the API server would refuse.
func toLinkTypes(in []string) []v1alpha1.LinkType {
	var out []v1alpha1.LinkType
	for _, t := range in {
		if _, ok := v1alpha1.LinkType(t).LinkLayer(); !ok {
			if l, ok := pluginLinkLayer(t); ok {
				t = l
			}
		}
		out = append(out, v1alpha1.LinkType(t))
	}
	return out
}

// check validates the pools as the controller would, and the legacy resources as the
// kubelet plugin would read them. A pool the API would refuse is a problem: the output
// would be applied only in part.
func (r *Result) check() {
	kept := r.Pools[:0]
	var legacy []nodeconfig.LegacyResource
	for i := range r.Pools {
		p := &r.Pools[i]
		if errs := p.Validate(); len(errs) > 0 {
			r.problem("pool "+p.Name, "", "", "the API would refuse it: %v; fix the entry in the input and convert again", errs.ToAggregate())
			continue
		}
		if p.Spec.Mode == v1alpha1.PoolModeLegacy {
			j := slices.IndexFunc(r.LegacyResources, func(lr nodeconfig.LegacyResource) bool { return lr.Name == p.Name })
			if j < 0 {
				r.problem("pool "+p.Name, "", "", "no legacyResources entry of that name; this is a bug of rdma-dra migrate")
				continue
			}
			if err := checkLegacyResource(r.LegacyResources[j]); err != nil {
				r.problem("pool "+p.Name, "legacyResources", "", "the kubelet plugin would refuse the node configuration: %v; fix the entry in the input and convert again", err)
				continue
			}
			legacy = append(legacy, r.LegacyResources[j])
		}
		kept = append(kept, *p)
	}
	r.Pools = kept
	r.LegacyResources = legacy
}

// checkLegacyResource reads lr as the kubelet plugin reads its node configuration.
func checkLegacyResource(lr nodeconfig.LegacyResource) error {
	data, err := json.Marshal(nodeconfig.Config{LegacyResources: []nodeconfig.LegacyResource{lr}})
	if err != nil {
		return err
	}
	_, err = nodeconfig.Parse(data)
	return err
}

// WriteYAML writes the pools as YAML documents separated by "---", without status.
func WriteYAML(pools []v1alpha1.RdmaPool) ([]byte, error) {
	var b bytes.Buffer
	for i := range pools {
		raw, err := json.Marshal(&pools[i])
		if err != nil {
			return nil, fmt.Errorf("encode pool %s: %w", pools[i].Name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		delete(m, "status")
		// A legacy pool has no selectors; the API's type still writes the empty object.
		if spec, ok := m["spec"].(map[string]any); ok {
			if sel, ok := spec["selectors"].(map[string]any); ok && len(sel) == 0 {
				delete(spec, "selectors")
			}
		}
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		out, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode pool %s: %w", pools[i].Name, err)
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return b.Bytes(), nil
}
