// Package migrate converts the configuration of the device plugins this driver
// replaces (k8s-rdma-shared-dev-plugin, sriov-network-device-plugin with isRdma) into
// RdmaPools, and says what does not carry over: the semantics of a unit differ, and some
// selectors have no equivalent in the driver's device attributes.
package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
)

// Result is the pools a configuration becomes and what the user must know about them.
type Result struct {
	Pools []v1alpha1.RdmaPool
	// Notes are the differences, one sentence each, in input order.
	Notes []string
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// configJSON finds the plugin's config.json in data: the file itself (JSON or YAML), a
// ConfigMap that holds it under data."config.json", or a NicClusterPolicy (NVIDIA
// Network Operator) that holds it as a string in spec.<section>.config.
func configJSON(data []byte, section string) ([]byte, string, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, "", fmt.Errorf("parse input: %w", err)
	}
	var doc struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
		Spec map[string]struct {
			Config *string `json:"config"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(jsonData, &doc); err != nil {
		return nil, "", fmt.Errorf("parse input: not an object: %w", err)
	}
	switch doc.Kind {
	case "ConfigMap":
		cfg, ok := doc.Data["config.json"]
		if !ok {
			return nil, "", errors.New(`ConfigMap has no data."config.json"`)
		}
		return []byte(cfg), "ConfigMap data.\"config.json\"", nil
	case "NicClusterPolicy":
		s, ok := doc.Spec[section]
		if !ok || s.Config == nil {
			return nil, "", fmt.Errorf("NicClusterPolicy has no spec.%s.config", section)
		}
		return []byte(*s.Config), "NicClusterPolicy spec." + section + ".config", nil
	case "":
		return jsonData, "config file", nil
	}
	return nil, "", fmt.Errorf("input is a %s; want the plugin's config.json, a ConfigMap holding it or a NicClusterPolicy", doc.Kind)
}

// decodeStrict decodes JSON into v and reports unknown fields as notes, not errors:
// the plugins ignore them too, and the user should hear that they were not carried over.
func decodeStrict(data []byte, v any, res *Result, where string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", where, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		res.note("%s: %v; ignored, as the plugin does", where, err)
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

// linkTypes keeps the link types a pool accepts and notes the others.
func linkTypes(in []string, res *Result, where string) []v1alpha1.LinkType {
	var out []v1alpha1.LinkType
	for _, t := range in {
		lt := v1alpha1.LinkType(t)
		if _, ok := lt.LinkLayer(); ok {
			out = append(out, lt)
			continue
		}
		res.note("%s: link type %q is neither InfiniBand nor Ethernet; dropped", where, t)
	}
	return out
}

// hexIDs keeps valid PCI IDs and notes the others.
func hexIDs(in []string, res *Result, where, field string) []string {
	var out []string
	for _, v := range in {
		n := selectorcheck.NormalizeHexID(v)
		if len(n) == 4 && strings.Trim(n, "0123456789abcdef") == "" {
			out = append(out, v)
			continue
		}
		res.note("%s: %s value %q is not a PCI ID of four hex digits; dropped", where, field, v)
	}
	return out
}

// check validates the pools as the controller would; a problem here is a bug of the
// conversion or an input value that passed through unchanged, and is noted.
//
// A pool the API would refuse is left out of the output, so that piping the output into
// kubectl apply never applies half of it; the note names the pool and what is wrong.
func (r *Result) check() {
	kept := r.Pools[:0]
	for i := range r.Pools {
		if errs := r.Pools[i].Validate(); len(errs) > 0 {
			r.note("pool %s: %v; left out of the output: fix the entry in the input and convert again", r.Pools[i].Name, errs.ToAggregate())
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
