// Package migrate converts the configuration of the device plugins this driver
// replaces (k8s-rdma-shared-dev-plugin, sriov-network-device-plugin with isRdma) into
// RdmaPools, and says what does not carry over.
//
// Invariant: a pool never selects a port the plugin's entry did not select, unless the
// user accepted that widening by name (Options.AllowWidening). Anything that cannot be
// expressed exactly and would widen the selection (an invalid selector value, a
// narrowing selector without equivalent, a selector field this package does not know)
// is a Problem naming the entry and the field; narrowing differences are notes.
package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
)

// Options tune a conversion.
type Options struct {
	// ResourcePrefix is the prefix of entries without resourcePrefix; empty means the
	// plugin's own default (SharedDevicePluginPrefix or SRIOVDevicePluginPrefix).
	ResourcePrefix string
	// AllowWidening accepts named widenings, each "<resourceName>:<field>" as a Problem's
	// WideningKey spells it. Each accepted widening becomes a note starting "WIDENED".
	AllowWidening []string
}

func (o Options) allows(key string) bool { return slices.Contains(o.AllowWidening, key) }

// Problem is something the conversion cannot do without changing what the entry
// selected, or a conflict with what already exists. The CLI prints every problem and
// exits with status 2; nothing is written to stdout.
type Problem struct {
	// Entry names the input entry: configList[0] (hca_shared_devices_a).
	Entry string
	// Field is the field path inside the entry: selectors.vendors.
	Field string
	// Message says what is wrong and what to do.
	Message string
	// WideningKey is the value of --allow-widening that accepts this problem; empty
	// when no flag can accept it.
	WideningKey string
}

// String is the one-line form the CLI prints.
func (p Problem) String() string {
	s := p.Entry
	if p.Field != "" {
		s += ": " + p.Field
	}
	s += ": " + p.Message
	if p.WideningKey != "" {
		s += fmt.Sprintf(" (to accept, pass --allow-widening %s)", p.WideningKey)
	}
	return s
}

// Result is the pools a configuration becomes and what the user must know about them.
type Result struct {
	Pools []v1alpha1.RdmaPool
	// Notes are the differences, one sentence each, in input order.
	Notes []string
	// Problems are the widenings not accepted and the conflicts; the pools must not be
	// applied while there are any.
	Problems []Problem
	// Entries are the converted entries with the plugin's own selection, for Preview.
	Entries []Entry
	// Accepted are the widening keys of Options.AllowWidening that accepted a widening.
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
	// Sets are the plugin's selector sets; a device matching any set is selected.
	Sets []PluginSelector
}

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
		r.note("WIDENED %s: %s: %s; accepted by --allow-widening %s: %s", entry, field, what, key, accepted)
		return
	}
	r.problem(entry, field, key, "%s", what)
}

// configJSON finds the plugin's config.json in data: the file itself (JSON or YAML), a
// ConfigMap that holds it under data."config.json", or a NicClusterPolicy (NVIDIA
// Network Operator) that holds it as a string in spec.<section>.config. other is the
// other plugin's section, named in the hint when only that one is there.
func configJSON(data []byte, section, other, otherFlag string) ([]byte, string, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, "", fmt.Errorf("parse input: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(jsonData, &doc); err != nil || doc == nil {
		return nil, "", fmt.Errorf("parse input: want a JSON or YAML object (the plugin's config.json, a ConfigMap or a NicClusterPolicy), got %s", jsonKind(jsonData))
	}
	var kind string
	if raw, ok := doc["kind"]; ok {
		if err := json.Unmarshal(raw, &kind); err != nil {
			return nil, "", errors.New("parse input: kind is not a string")
		}
	}
	switch kind {
	case "ConfigMap":
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal(jsonData, &cm); err != nil {
			return nil, "", errors.New(`parse input: ConfigMap data must map names to strings`)
		}
		cfg, ok := cm.Data["config.json"]
		if !ok {
			return nil, "", errors.New(`ConfigMap has no data."config.json"`)
		}
		return []byte(cfg), "ConfigMap data.\"config.json\"", nil
	case "NicClusterPolicy":
		var ncp struct {
			Spec map[string]json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(jsonData, &ncp); err != nil {
			return nil, "", errors.New("parse input: NicClusterPolicy spec is not an object")
		}
		cfg, ok := sectionConfig(ncp.Spec[section])
		if !ok {
			if _, has := sectionConfig(ncp.Spec[other]); has {
				return nil, "", fmt.Errorf("NicClusterPolicy has no spec.%s.config but has spec.%s.config: use %s", section, other, otherFlag)
			}
			return nil, "", fmt.Errorf("NicClusterPolicy has no spec.%s.config", section)
		}
		return []byte(cfg), "NicClusterPolicy spec." + section + ".config", nil
	case "":
		return jsonData, "config file", nil
	}
	return nil, "", fmt.Errorf("input is a %s; want the plugin's config.json, a ConfigMap holding it or a NicClusterPolicy", kind)
}

func sectionConfig(raw json.RawMessage) (string, bool) {
	var s struct {
		Config *string `json:"config"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s.Config == nil {
		return "", false
	}
	return *s.Config, true
}

// jsonKind names the JSON type of data for messages: never a Go type.
func jsonKind(data []byte) string {
	t := strings.TrimSpace(string(data))
	switch {
	case t == "" || t == "null":
		return "nothing"
	case strings.HasPrefix(t, "["):
		return "a list"
	case strings.HasPrefix(t, `"`):
		return "a string"
	case t == "true" || t == "false":
		return "a boolean"
	}
	return "a number"
}

// objectKeys returns the keys of a JSON object; ok is false if raw is not an object.
func objectKeys(raw []byte) (keys []string, ok bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, true
}

// unknownKeys returns the keys of the object raw that are not in known, sorted.
func unknownKeys(raw []byte, known ...string) []string {
	keys, _ := objectKeys(raw)
	var out []string
	for _, k := range keys {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	return out
}

// decodeField decodes JSON into v with a message that names the place and the JSON
// type, not a Go type.
func decode(raw []byte, v any, where string) error {
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "the document"
			}
			return fmt.Errorf("decode %s: %s is %s, which is the wrong type", where, field, te.Value)
		}
		return fmt.Errorf("decode %s: %w", where, err)
	}
	return nil
}

var invalidName = regexp.MustCompile(`[^a-z0-9]+`)

// poolName turns a resource name (hca_shared_devices_a) into a pool name
// (hca-shared-devices-a), unique among taken.
func poolName(resourceName string, taken map[string]bool) string {
	// Every run of other characters becomes one '-': the result is a DNS label.
	name := strings.Trim(invalidName.ReplaceAllString(strings.ToLower(resourceName), "-"), "-")
	if name == "" {
		name = "rdma-pool"
	}
	if len(name) > 56 {
		name = strings.TrimRight(name[:56], "-")
	}
	base := name
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
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

// check validates the pools as the controller would. A pool the API would refuse is a
// problem: the output would be applied only in part.
func (r *Result) check() {
	kept := r.Pools[:0]
	for i := range r.Pools {
		if errs := r.Pools[i].Validate(); len(errs) > 0 {
			r.problem("pool "+r.Pools[i].Name, "", "", "the API would refuse it: %v; fix the entry in the input and convert again", errs.ToAggregate())
			continue
		}
		kept = append(kept, r.Pools[i])
	}
	r.Pools = kept
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
