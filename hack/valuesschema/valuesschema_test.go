package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func TestOrderedRoundTrip(t *testing.T) {
	// Keys out of order, nesting, empty containers, numbers as written, escapes.
	in := `{
  "z": {
    "b": [
      1.50,
      -2,
      true,
      null
    ],
    "a": {},
    "c": []
  },
  "pattern": "^([0-9]+(ns|\u00b5s))+$|\\.<a&b>",
  "emoji": "\ud83d\ude00"
}
`
	v, err := decodeOrdered([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := encodeOrdered(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip:\n%s\nwant:\n%s", out, in)
	}
	for _, bad := range []string{`{"a": 1, "a": 2}`, `{"a": 1} {}`, `{"a": }`} {
		if _, err := decodeOrdered([]byte(bad)); err == nil {
			t.Errorf("decoded %s", bad)
		}
	}
}

// crdSchema decodes the YAML of an OpenAPI v3 schema as a CRD holds it.
func crdSchema(t *testing.T, y string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var p apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(y), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestFromCRD(t *testing.T) {
	tests := []struct {
		name, crd, want, wantErr string
	}{{
		name: "unknown fields refused, sets unique, int32 bounded",
		crd: `
type: object
properties:
  names: {type: array, maxItems: 3, x-kubernetes-list-type: set, items: {type: string, minLength: 1}}
  speed: {type: integer, format: int32, minimum: 0}`,
		want: `{"type":"object","properties":{"names":{"type":"array","items":{"type":"string","minLength":1},"uniqueItems":true,"maxItems":3},` +
			`"speed":{"type":"integer","minimum":0,"maximum":2147483647}},"additionalProperties":false}`,
	}, {
		name: "preserved unknown fields stay open",
		crd:  `{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {a: {type: string}}}`,
		want: `{"type":"object","properties":{"a":{"type":"string"}}}`,
	}, {
		name: "enum and required",
		crd:  `{type: object, required: [mode], properties: {mode: {type: string, enum: [shared, exclusive]}}}`,
		want: `{"type":"object","properties":{"mode":{"type":"string","enum":["shared","exclusive"]}},"additionalProperties":false,"required":["mode"]}`,
	}, {
		name: "matches rule becomes a pattern, others are left to the API server",
		crd: `
type: string
x-kubernetes-validations:
- {rule: "self.matches('^a\\\\.b$')"}
- {rule: "self == oldSelf"}`,
		want: `{"type":"string","pattern":"^a\\.b$"}`,
	}, {
		name: "all-match rule becomes the items' pattern",
		crd: `
type: object
properties:
  vendors: {type: array, items: {type: string}}
x-kubernetes-validations:
- rule: "!has(self.vendors) || self.vendors.all(v, v.matches('^[0-9a-f]{4}$'))"`,
		want: `{"type":"object","properties":{"vendors":{"type":"array","items":{"type":"string","pattern":"^[0-9a-f]{4}$"}}},"additionalProperties":false}`,
	}, {
		name: "all-match rule on another field is not converted",
		crd: `
type: object
properties:
  a: {type: array, items: {type: string}}
x-kubernetes-validations:
- rule: "!has(self.a) || self.b.all(v, v.matches('x'))"`,
		want: `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`,
	}, {
		name:    "all-match rule on a field that is missing",
		crd:     `{type: object, properties: {a: {type: string}}, x-kubernetes-validations: [{rule: "!has(self.b) || self.b.all(v, v.matches('x'))"}]}`,
		wantErr: "a rule matches the items of b, which it does not have",
	}, {
		name:    "anyOf",
		crd:     `{type: object, properties: {a: {anyOf: [{type: string}, {type: integer}]}}}`,
		wantErr: "spec.a: allOf, anyOf, oneOf or not: the values schema generator does not convert it yet",
	}, {
		name:    "format",
		crd:     `{type: string, format: date-time}`,
		wantErr: "format date-time",
	}, {
		name:    "map of strings",
		crd:     `{type: object, additionalProperties: {type: string}}`,
		wantErr: "additionalProperties or patternProperties",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fromCRD(crdSchema(t, tt.crd), "spec")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := compact(t, got); s != tt.want {
				t.Errorf("converted\n%s\nwant\n%s", s, tt.want)
			}
		})
	}
}

func TestUnquoteCEL(t *testing.T) {
	for in, want := range map[string]string{`a\\.b`: `a\.b`, `it\'s`: `it's`, `q\"`: `q"`, `plain`: `plain`} {
		if got, ok := unquoteCEL(in); !ok || got != want {
			t.Errorf("unquoteCEL(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{`\n`, `tail\`, `\u0041`} {
		if got, ok := unquoteCEL(in); ok {
			t.Errorf("unquoteCEL(%q) = %q, want no conversion", in, got)
		}
	}
}

// compact encodes v on one line, for comparisons.
func compact(t *testing.T, v any) string {
	t.Helper()
	out, err := encodeOrdered(v)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		b.WriteString(strings.Replace(line, `": `, `":`, 1))
	}
	return b.String()
}

const testSpec = `
type: object
required: [mode]
properties:
  mode: {type: string, enum: [shared, exclusive]}
  cel: {type: string, maxLength: 10}
  extendedResourceName: {type: string, x-kubernetes-validations: [{rule: "self.matches('^[a-z]+/[a-z]+$')"}]}
  config: {type: object, x-kubernetes-preserve-unknown-fields: true}
  selectors: {type: object, properties: {linkTypes: {type: array, items: {type: string, enum: [InfiniBand, Ethernet]}}}}
`

func TestRewrite(t *testing.T) {
	values := `{
  "definitions": {
    "pool": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "enabled": {
          "type": "boolean"
        },
        "cel": {
          "type": "string"
        }
      }
    }
  },
  "properties": {
    "pools": {
      "type": "object",
      "properties": {
        "shared": {
          "$ref": "#/definitions/pool"
        },
        "exclusive": {
          "$ref": "#/definitions/pool"
        },
        "legacy": {
          "type": "object",
          "required": [
            "extendedResourceName"
          ]
        },
        "extra": {
          "type": "array",
          "items": {
            "type": "object",
            "properties": {
              "name": {
                "type": "string"
              }
            }
          }
        }
      }
    }
  }
}
`
	out, err := rewrite([]byte(values), crdSchema(t, testSpec), "crds/test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := decodeOrdered(out)
	if err != nil {
		t.Fatal(err)
	}
	root := doc.(*object)
	pool, err := resolve(root, "pools.shared")
	if err != nil {
		t.Fatal(err)
	}
	// The hand-written fields stay first and as written; cel is replaced in place.
	wantPool := `{"type":"object","additionalProperties":false,"properties":{"enabled":{"type":"boolean"},` +
		`"cel":{"$ref":"#/definitions/rdmaPoolSpec/properties/cel"},` +
		`"selectors":{"$ref":"#/definitions/rdmaPoolSpec/properties/selectors"},` +
		`"extendedResourceName":{"anyOf":[{"type":"string","maxLength":0},{"$ref":"#/definitions/rdmaPoolSpec/properties/extendedResourceName"}]},` +
		`"config":{"$ref":"#/definitions/rdmaPoolSpec/properties/config"}}}`
	if got := compact(t, pool); got != wantPool {
		t.Errorf("pools.shared:\n%s\nwant\n%s", got, wantPool)
	}
	extra, err := resolve(root, "pools.extra[]")
	if err != nil {
		t.Fatal(err)
	}
	if got := compact(t, extra); !strings.Contains(got, `"name":{"type":"string"},"mode":{"$ref":"#/definitions/rdmaPoolSpec/properties/mode"}`) {
		t.Errorf("pools.extra[] has no mode from the CRD after its name: %s", got)
	}
	legacy, err := resolve(root, "pools.legacy")
	if err != nil {
		t.Fatal(err)
	}
	// Required, so set: the empty name is not allowed.
	if got := compact(t, legacy); !strings.Contains(got, `"extendedResourceName":{"$ref":"#/definitions/rdmaPoolSpec/properties/extendedResourceName"}`) {
		t.Errorf("pools.legacy's required extendedResourceName accepts the empty value: %s", got)
	}
	def, err := childObject(root.values["definitions"].(*object), specDefinition, "test")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := def.getString("$comment"); !strings.Contains(c, "from crds/test.yaml") || !strings.Contains(c, "pools.shared, pools.exclusive, pools.extra[], pools.legacy") {
		t.Errorf("$comment %q does not name its source and the values", c)
	}

	again, err := rewrite(out, crdSchema(t, testSpec), "crds/test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(out) {
		t.Errorf("a second run changes the output:\n%s", again)
	}
}

func TestRewriteErrors(t *testing.T) {
	for name, tt := range map[string]struct{ values, spec, wantErr string }{
		"no definitions": {values: `{"properties": {}}`, spec: testSpec, wantErr: `no object "definitions"`},
		"value without a schema": {values: `{"definitions": {}, "properties": {"pools": {"properties": {"shared": {}}}}}`, spec: testSpec,
			wantErr: `pools.exclusive: no object "exclusive" where one is expected; write the value's schema first`},
		"dangling reference": {values: `{"definitions": {}, "properties": {"pools": {"properties": {"shared": {"$ref": "#/definitions/gone"}}}}}`, spec: testSpec,
			wantErr: `pools.shared: no object "gone"`},
		"spec without the field": {values: `{"definitions": {}, "properties": {"pools": {"properties": {"shared": {}, "exclusive": {}, "extra": {"items": {}}, "legacy": {}}}}}`,
			spec: `{type: object, properties: {mode: {type: string}}}`, wantErr: "the RdmaPool spec has no field selectors (pools.shared takes it)"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := rewrite([]byte(tt.values), crdSchema(t, tt.spec), "crds/test.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestRun reads the chart's own CRD: its spec must convert without an error.
func TestRun(t *testing.T) {
	repo := filepath.Join("..", "..")
	crd := filepath.Join(repo, chartDir, "crds", "rdma.dra.io_rdmapools.yaml")
	out := filepath.Join(t.TempDir(), "values.schema.json")
	if err := run(crd, "v1alpha1", filepath.Join(repo, chartDir, "values.schema.json"), out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"rdmaPoolSpec": {`, `"linkTypes": {`, `"additionalProperties": false`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the generated schema has no %s", want)
		}
	}
	if err := run(crd, "v9", filepath.Join(repo, chartDir, "values.schema.json"), out); err == nil || !strings.Contains(err.Error(), "no version v9") {
		t.Errorf("version v9: %v", err)
	}
}
