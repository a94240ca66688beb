package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

const schemaFile = "../../docs/inventory.schema.json"

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	return s
}

// validate checks v against the subset of JSON Schema the inventory schema uses and
// returns the violations with their paths.
func validate(root, s map[string]any, v any, path string) []string {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		return validate(root, root["$defs"].(map[string]any)[name].(map[string]any), v, path)
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) }
	if c, ok := s["const"]; ok && !reflect.DeepEqual(c, v) {
		fail("%v is not %v", v, c)
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return reflect.DeepEqual(x, v) }) {
		fail("%v is not one of %v", v, e)
	}
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			fail("not an object")
			return errs
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range s["required"].([]any) {
			if _, ok := m[r.(string)]; !ok {
				fail("%s missing", r)
			}
		}
		for k, x := range m {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					fail("unknown key %s", k)
				}
				continue
			}
			errs = append(errs, validate(root, ps, x, path+"."+k)...)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			fail("not an array")
			return errs
		}
		for i, x := range a {
			errs = append(errs, validate(root, s["items"].(map[string]any), x, fmt.Sprintf("%s[%d]", path, i))...)
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			fail("not a string")
		} else if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			fail("%q does not match %s", str, p)
		}
	case "integer":
		f, ok := v.(float64)
		if !ok || f != float64(int64(f)) {
			fail("%v is not an integer", v)
		}
		if m, ok := s["minimum"].(float64); ok && f < m {
			fail("%v < %v", f, m)
		}
		if m, ok := s["maximum"].(float64); ok && f > m {
			fail("%v > %v", f, m)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("not a boolean")
		}
	}
	return errs
}

// TestInventorySchemaMatchesTypes: the schema lists exactly the JSON keys of the
// inventory types, and requires exactly those that are always written.
func TestInventorySchemaMatchesTypes(t *testing.T) {
	s := loadSchema(t)
	defs := s["$defs"].(map[string]any)
	for _, tt := range []struct {
		def string
		typ reflect.Type
	}{{"port", reflect.TypeOf(discovery.Port{})}, {"chardev", reflect.TypeOf(discovery.CharDev{})}} {
		var keys, required []string
		for i := range tt.typ.NumField() {
			name, opts, _ := strings.Cut(tt.typ.Field(i).Tag.Get("json"), ",")
			keys = append(keys, name)
			if !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
		def := defs[tt.def].(map[string]any)
		var schemaKeys, schemaRequired []string
		for k := range def["properties"].(map[string]any) {
			schemaKeys = append(schemaKeys, k)
		}
		for _, r := range def["required"].([]any) {
			schemaRequired = append(schemaRequired, r.(string))
		}
		for _, l := range [][]string{keys, required, schemaKeys, schemaRequired} {
			sort.Strings(l)
		}
		if !slices.Equal(keys, schemaKeys) {
			t.Errorf("%s: type keys %v, schema %v", tt.def, keys, schemaKeys)
		}
		if !slices.Equal(required, schemaRequired) {
			t.Errorf("%s: always written %v, schema requires %v", tt.def, required, schemaRequired)
		}
	}
	if got := s["properties"].(map[string]any)["version"].(map[string]any)["const"]; got != discovery.InventoryVersion {
		t.Errorf("schema version %v, code %s", got, discovery.InventoryVersion)
	}
	// The validator can fail.
	bad := map[string]any{"version": discovery.InventoryVersion, "ports": []any{map[string]any{"ibdev": "x", "port": 0.0, "link_layer": "Token Ring", "sriov_vf": false, "lag": false, "virtual": false, "extra": 1.0}}}
	if errs := validate(s, s, bad, "$"); len(errs) != 3 {
		t.Errorf("validation of a bad document: %v, want 3 errors (port < 1, link_layer, extra)", errs)
	}
}

// TestInventoryRoundTrip: for every mock profile, discover -o json is valid against the
// schema, decodes to the inventory discovery returns, and slices --inventory of it prints
// the same slices as slices --sysfs-root.
func TestInventoryRoundTrip(t *testing.T) {
	s := loadSchema(t)
	for _, p := range mocknode.Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			root := writeProfile(t, p.Name, "N")
			doc, stderr, code := runApp(t, "", "discover", "--sysfs-root", root, "-o", "json")
			if code != 0 {
				t.Fatalf("discover: %d %s", code, stderr)
			}
			var v any
			if err := json.Unmarshal([]byte(doc), &v); err != nil {
				t.Fatal(err)
			}
			if errs := validate(s, s, v, "$"); len(errs) > 0 {
				t.Errorf("schema violations:\n%s", strings.Join(errs, "\n"))
			}
			inv, err := discovery.UnmarshalInventory([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			want, err := discovery.New(discovery.Options{SysfsRoot: root}).Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, inv); diff != "" {
				t.Errorf("decoded inventory differs (-discovered +decoded):\n%s", diff)
			}
			fromDoc, stderr, code := runApp(t, doc, "slices", "--node", "n1", "--inventory", "-")
			if code != 0 {
				t.Fatalf("slices --inventory: %d %s", code, stderr)
			}
			fromTree, _, _ := runApp(t, "", "slices", "--node", "n1", "--sysfs-root", root)
			if fromDoc != fromTree || fromDoc == "" {
				t.Errorf("slices from the document and from the tree differ")
			}
		})
	}
}
