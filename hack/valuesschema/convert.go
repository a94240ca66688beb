package main

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// fromCRD converts a CRD's structural OpenAPI v3 schema into the JSON Schema draft-07
// that Helm validates values with. What the API server would do to a value the schema
// does not name, Helm should refuse instead:
//   - an object with properties and no x-kubernetes-preserve-unknown-fields gets
//     additionalProperties: false (the API server prunes unknown fields silently, so a
//     misspelt selector would select every port);
//   - x-kubernetes-list-type: set becomes uniqueItems;
//   - format int32 becomes its bounds (draft-07 has no integer formats);
//   - the CEL rules of two shapes become patterns: self.matches('RE') on a string, and
//     !has(self.F) || self.F.all(x, x.matches('RE')) on an object. The API server checks
//     the other rules when the pool is created; their meaning needs CEL.
//
// Anything else a JSON schema cannot say the same way (allOf, anyOf, nullable, other
// formats, ...) is an error, so that the values schema never silently accepts less than
// it says.
func fromCRD(p *apiextensionsv1.JSONSchemaProps, at string) (*object, error) {
	if err := unsupported(p, at); err != nil {
		return nil, err
	}
	o := newObject()
	if p.Description != "" {
		o.set("description", p.Description)
	}
	if p.Type != "" {
		o.set("type", p.Type)
	}
	if len(p.Enum) > 0 {
		var enum []any
		for _, e := range p.Enum {
			v, err := decodeOrdered(e.Raw)
			if err != nil {
				return nil, fmt.Errorf("%s: enum: %w", at, err)
			}
			enum = append(enum, v)
		}
		o.set("enum", enum)
	}
	pattern := p.Pattern
	for _, rule := range p.XValidations {
		if re, ok := matchesRule(rule.Rule); ok && p.Type == "string" {
			if pattern != "" && pattern != re {
				return nil, fmt.Errorf("%s: a pattern and the rule %q: write one of them", at, rule.Rule)
			}
			pattern = re
		}
	}
	if pattern != "" {
		o.set("pattern", pattern)
	}
	setInt(o, "minLength", p.MinLength)
	setInt(o, "maxLength", p.MaxLength)
	minimum, maximum := p.Minimum, p.Maximum
	if p.Format == "int32" {
		if minimum == nil {
			minimum = ptr(float64(math.MinInt32))
		}
		if maximum == nil {
			maximum = ptr(float64(math.MaxInt32))
		}
	}
	setNumber(o, "minimum", minimum)
	setNumber(o, "maximum", maximum)
	if p.Items != nil {
		items, err := fromCRD(p.Items.Schema, at+"[]")
		if err != nil {
			return nil, err
		}
		o.set("items", items)
	}
	if p.XListType != nil && *p.XListType == "set" {
		o.set("uniqueItems", true)
	}
	setInt(o, "minItems", p.MinItems)
	setInt(o, "maxItems", p.MaxItems)
	if len(p.Properties) > 0 {
		itemPatterns := map[string]string{}
		for _, rule := range p.XValidations {
			if field, re, ok := allMatchRule(rule.Rule); ok {
				itemPatterns[field] = re
			}
		}
		names := make([]string, 0, len(p.Properties))
		for name := range p.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		props := newObject()
		for _, name := range names {
			child := p.Properties[name]
			s, err := fromCRD(&child, at+"."+name)
			if err != nil {
				return nil, err
			}
			if re, ok := itemPatterns[name]; ok {
				items, _ := s.get("items")
				itemSchema, _ := items.(*object)
				if typ, _ := itemSchema.getString("type"); typ != "string" {
					return nil, fmt.Errorf("%s.%s: a rule matches its items, which are no strings", at, name)
				}
				if old, _ := itemSchema.getString("pattern"); old != "" && old != re {
					return nil, fmt.Errorf("%s.%s: its items have a pattern and a rule: write one of them", at, name)
				}
				itemSchema.set("pattern", re)
				delete(itemPatterns, name)
			}
			props.set(name, s)
		}
		for field := range itemPatterns {
			return nil, fmt.Errorf("%s: a rule matches the items of %s, which it does not have", at, field)
		}
		o.set("properties", props)
		if p.XPreserveUnknownFields == nil || !*p.XPreserveUnknownFields {
			o.set("additionalProperties", false)
		}
	}
	if len(p.Required) > 0 {
		var required []any
		for _, r := range p.Required {
			required = append(required, r)
		}
		o.set("required", required)
	}
	return o, nil
}

// unsupported names the first construct of p that fromCRD cannot carry over.
func unsupported(p *apiextensionsv1.JSONSchemaProps, at string) error {
	var what []string
	if p.Ref != nil {
		what = append(what, "$ref")
	}
	if len(p.AllOf)+len(p.AnyOf)+len(p.OneOf) > 0 || p.Not != nil {
		what = append(what, "allOf, anyOf, oneOf or not")
	}
	if p.Nullable {
		what = append(what, "nullable")
	}
	if p.AdditionalProperties != nil || len(p.PatternProperties) > 0 {
		what = append(what, "additionalProperties or patternProperties")
	}
	if p.XIntOrString || p.XEmbeddedResource {
		what = append(what, "x-kubernetes-int-or-string or x-kubernetes-embedded-resource")
	}
	if p.ExclusiveMinimum || p.ExclusiveMaximum || p.MultipleOf != nil || p.MinProperties != nil || p.MaxProperties != nil {
		what = append(what, "exclusive bounds, multipleOf or a property count")
	}
	if p.Items != nil && (p.Items.Schema == nil || len(p.Items.JSONSchemas) > 0) {
		what = append(what, "items as a list of schemas")
	}
	switch p.Format {
	case "", "int32", "int64":
	default:
		what = append(what, "format "+p.Format)
	}
	if len(what) > 0 {
		return fmt.Errorf("%s: %s: the values schema generator does not convert it yet (hack/valuesschema)", at, strings.Join(what, ", "))
	}
	return nil
}

var (
	matchesRE  = regexp.MustCompile(`^self\.matches\('((?:[^'\\]|\\.)*)'\)$`)
	allMatchRE = regexp.MustCompile(`^!has\(self\.(\w+)\) \|\| self\.(\w+)\.all\((\w+), (\w+)\.matches\('((?:[^'\\]|\\.)*)'\)\)$`)
)

// matchesRule returns the regular expression of a rule self.matches('RE').
func matchesRule(rule string) (string, bool) {
	m := matchesRE.FindStringSubmatch(rule)
	if m == nil {
		return "", false
	}
	return unquoteCEL(m[1])
}

// allMatchRule returns the field and the regular expression of a rule
// !has(self.F) || self.F.all(x, x.matches('RE')).
func allMatchRule(rule string) (field, re string, ok bool) {
	m := allMatchRE.FindStringSubmatch(rule)
	if m == nil || m[1] != m[2] || m[3] != m[4] {
		return "", "", false
	}
	re, ok = unquoteCEL(m[5])
	return m[1], re, ok
}

// unquoteCEL undoes the escapes of a single-quoted CEL string. It knows \\, \' and \"
// only: a rule with another escape is not converted.
func unquoteCEL(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) || !strings.ContainsRune(`\'"`, rune(s[i])) {
			return "", false
		}
		b.WriteByte(s[i])
	}
	return b.String(), true
}

func setInt(o *object, key string, v *int64) {
	if v != nil {
		o.set(key, json.Number(strconv.FormatInt(*v, 10)))
	}
}

func setNumber(o *object, key string, v *float64) {
	if v != nil {
		o.set(key, json.Number(strconv.FormatFloat(*v, 'f', -1, 64)))
	}
}

func ptr[T any](v T) *T { return &v }

// acceptsEmpty says whether the converted schema s accepts the empty value of its type
// ("" or {}), which the pools template omits.
func acceptsEmpty(s *object) bool {
	if _, ok := s.get("pattern"); ok {
		return false
	}
	for _, key := range []string{"minLength", "required", "enum"} {
		if _, ok := s.get(key); ok {
			return false
		}
	}
	return true
}

func jsonInt(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }
