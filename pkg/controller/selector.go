package controller

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// The attributes the generated CEL reads. Each is looked up in devicemodel.Attributes,
// the one list of names, when the package loads: a renamed attribute fails every test
// of this package instead of producing classes that select nothing.
var (
	attrMode      = mustAttribute(devicemodel.AttrMode)
	attrVendorID  = mustAttribute(devicemodel.AttrVendorID)
	attrDeviceID  = mustAttribute(devicemodel.AttrDeviceID)
	attrDriver    = mustAttribute(devicemodel.AttrDriver)
	attrNetdev    = mustAttribute(devicemodel.AttrNetdev)
	attrIBDev     = mustAttribute(devicemodel.AttrIBDev)
	attrPort      = mustAttribute(devicemodel.AttrPort)
	attrLinkLayer = mustAttribute(devicemodel.AttrLinkLayer)
	attrSpeed     = mustAttribute(devicemodel.AttrSpeedGbps)
	attrPCIBusID  = mustAttribute(deviceattribute.StandardDeviceAttributePCIBusID)
)

// The attributes of the device a node publishes for a legacy pool: which pool it serves
// and how many ports it stands for. They are looked up in devicemodel.LegacyAttributes.
var (
	attrLegacyResource = mustLegacyAttribute(devicemodel.AttrLegacyResource)
	attrPorts          = mustLegacyAttribute(devicemodel.AttrPorts)
)

// celAttribute is a device attribute as CEL reads it.
type celAttribute struct {
	domain, id string
}

func mustAttribute(name resourceapi.QualifiedName) celAttribute {
	return mustListed(name, devicemodel.Attributes(), "devicemodel.Attributes")
}

func mustLegacyAttribute(name resourceapi.QualifiedName) celAttribute {
	return mustListed(name, devicemodel.LegacyAttributes(), "devicemodel.LegacyAttributes")
}

func mustListed(name resourceapi.QualifiedName, list []devicemodel.Attribute, listName string) celAttribute {
	if !slices.ContainsFunc(list, func(a devicemodel.Attribute) bool { return a.Name == name }) {
		panic(fmt.Sprintf("attribute %s is not in %s", name, listName))
	}
	domain, id, _ := strings.Cut(string(name), "/")
	return celAttribute{domain: domain, id: id}
}

// ref is the CEL of the attribute's value. Attribute IDs are C identifiers, so field
// selection works; the domain is a map key.
func (a celAttribute) ref() string {
	return fmt.Sprintf("device.attributes[%s].%s", celString(a.domain), a.id)
}

// present guards every comparison: reading an attribute a device does not have is a
// runtime error, which would fail the whole allocation instead of skipping the device.
func (a celAttribute) present() string {
	return fmt.Sprintf("has(%s)", a.ref())
}

// ClassCEL returns the CEL selector of a pool's DeviceClass: the driver's devices of the
// pool's mode that match every selector, and the pool's own expression. A legacy pool
// selects its own device on each node instead (legacy_resource is the pool's name), and
// has no selectors. It is the one place that turns a pool into CEL; the default pools of
// the chart go through it too. Values must have passed RdmaPool.Validate; ClassCEL still
// returns an error for values it cannot express rather than writing a wrong expression.
func ClassCEL(driverName string, pool *v1alpha1.RdmaPool) (string, error) {
	spec := &pool.Spec
	terms := []string{
		"device.driver == " + celString(driverName),
		attrMode.ref() + " == " + celString(string(spec.Mode)),
	}
	var err error
	if spec.Mode == v1alpha1.PoolModeLegacy {
		terms, err = legacyTerms(terms, pool.Name, &spec.Selectors)
	} else {
		terms, err = selectorTerms(terms, &spec.Selectors)
	}
	if err != nil {
		return "", err
	}
	if e := strings.TrimSpace(spec.CEL); e != "" {
		term, err := userTerm(e)
		if err != nil {
			return "", fmt.Errorf("spec.cel: %w", err)
		}
		terms = append(terms, term)
	}
	expr := strings.Join(terms, " && ")
	if err := checkConjunction(expr, terms); err != nil {
		return "", err
	}
	return expr, nil
}

// PoolCEL is ClassCEL for the spec of a shared or exclusive pool, whose selector does
// not depend on the pool's name. A legacy pool's selector does: PoolCEL refuses it.
func PoolCEL(driverName string, spec *v1alpha1.RdmaPoolSpec) (string, error) {
	if spec.Mode == v1alpha1.PoolModeLegacy {
		return "", fmt.Errorf("spec.mode: a legacy pool's selector names the pool: ClassCEL makes it from the whole pool")
	}
	return ClassCEL(driverName, &v1alpha1.RdmaPool{Spec: *spec})
}

// legacyTerms adds the terms of a legacy pool called name: its device on each node. It
// has no selectors (the node configuration selects the ports the device stands for).
func legacyTerms(terms []string, name string, s *v1alpha1.PoolSelectors) ([]string, error) {
	if !s.Empty() {
		return nil, fmt.Errorf("spec.selectors: must be empty in legacy mode: the node configuration's legacyResources entry named after the pool selects its ports")
	}
	if name == "" {
		return nil, fmt.Errorf("metadata.name: a legacy pool's selector names the pool, and the name is empty")
	}
	return append(terms, fmt.Sprintf("%s && %s == %s", attrLegacyResource.present(), attrLegacyResource.ref(), celString(name))), nil
}

// selectorTerms adds the terms of the selectors of a shared or exclusive pool.
func selectorTerms(terms []string, s *v1alpha1.PoolSelectors) ([]string, error) {
	layers, err := linkLayers(s.LinkTypes)
	if err != nil {
		return nil, err
	}
	terms = appendTerm(terms, exactTerm(attrVendorID, mapStrings(s.Vendors, selectorcheck.NormalizeHexID)))
	terms = appendTerm(terms, exactTerm(attrDeviceID, mapStrings(s.DeviceIDs, selectorcheck.NormalizeHexID)))
	terms = appendTerm(terms, exactTerm(attrDriver, s.Drivers))
	terms = appendTerm(terms, exactTerm(attrLinkLayer, layers))
	// PCI addresses are published in lower case; users copy them from lspci, which
	// also writes lower case, or from firmware tools, which may not.
	for _, p := range []struct {
		attr   celAttribute
		values []string
	}{
		{attrNetdev, s.IfNames},
		{attrIBDev, s.IBDevs},
		{attrPCIBusID, mapStrings(s.PCIAddresses, strings.ToLower)},
	} {
		term, err := patternTerm(p.attr, p.values)
		if err != nil {
			return nil, err
		}
		terms = appendTerm(terms, term)
	}
	if s.MinSpeedGbps != nil && *s.MinSpeedGbps > 0 {
		terms = append(terms, fmt.Sprintf("%s && %s >= %d", attrSpeed.present(), attrSpeed.ref(), *s.MinSpeedGbps))
	}
	return terms, nil
}

// exactTerm selects devices whose attribute is one of values.
func exactTerm(a celAttribute, values []string) string {
	if len(values) == 0 {
		return ""
	}
	return fmt.Sprintf("%s && %s in %s", a.present(), a.ref(), celList(uniqueSorted(values)))
}

// patternTerm selects devices whose attribute matches one of the names or shell
// patterns: exact names with `in`, patterns with an anchored RE2 `matches`.
func patternTerm(a celAttribute, values []string) (string, error) {
	if len(values) == 0 {
		return "", nil
	}
	var exact, alts []string
	for _, v := range uniqueSorted(values) {
		if !isPattern(v) {
			exact = append(exact, v)
			continue
		}
		re, err := globToRegexp(v)
		if err != nil {
			return "", err
		}
		alts = append(alts, re)
	}
	var ors []string
	if len(exact) > 0 {
		ors = append(ors, a.ref()+" in "+celList(exact))
	}
	if len(alts) > 0 {
		// One regular expression for all patterns: one match call per device.
		ors = append(ors, fmt.Sprintf("%s.matches(%s)", a.ref(), celString("^(?:"+strings.Join(alts, "|")+")$")))
	}
	if len(ors) == 1 {
		return a.present() + " && " + ors[0], nil
	}
	return fmt.Sprintf("%s && (%s)", a.present(), strings.Join(ors, " || ")), nil
}

func appendTerm(terms []string, term string) []string {
	if term == "" {
		return terms
	}
	return append(terms, term)
}

func mapStrings(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func linkLayers(types []v1alpha1.LinkType) ([]string, error) {
	var out []string
	for _, t := range types {
		l, ok := t.LinkLayer()
		if !ok {
			return nil, fmt.Errorf("link type %q is neither InfiniBand nor Ethernet", t)
		}
		out = append(out, l)
	}
	return out, nil
}

func uniqueSorted(values []string) []string {
	out := slices.Clone(values)
	slices.Sort(out)
	return slices.Compact(out)
}

func celList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = celString(v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// celString writes s as a CEL string literal. CEL's escapes are those of Go for the
// characters quoted here, and non-printable or non-ASCII runes use \u, which both know.
func celString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// isPattern reports whether v has a character that path.Match treats specially.
func isPattern(v string) bool {
	return strings.ContainsAny(v, `*?[\`)
}

// globToRegexp translates a shell pattern, as path.Match reads it, into an RE2
// expression (without anchors) that matches the same strings: '*' is any run of
// characters but '/', '?' one character but '/', [...] a class ([^...] negated, a-z
// ranges), '\' quotes the next character. Every literal is written as \x{..} or a
// letter or digit, so nothing of the input is left for RE2 to interpret.
func globToRegexp(pattern string) (string, error) {
	var b strings.Builder
	runes := []rune(pattern)
	for i := 0; i < len(runes); i++ {
		switch r := runes[i]; r {
		case '*':
			b.WriteString(`[^/]*`)
		case '?':
			b.WriteString(`[^/]`)
		case '\\':
			i++
			if i == len(runes) {
				return "", fmt.Errorf("pattern %q ends in a backslash", pattern)
			}
			b.WriteString(reLiteral(runes[i]))
		case '[':
			class, next, err := globClass(runes, i+1)
			if err != nil {
				return "", fmt.Errorf("pattern %q: %w", pattern, err)
			}
			b.WriteString(class)
			i = next
		default:
			b.WriteString(reLiteral(r))
		}
	}
	return b.String(), nil
}

// globClass translates the class that starts after the '[' at runes[start-1] and returns
// the index of its closing ']'.
func globClass(runes []rune, start int) (string, int, error) {
	i := start
	negated := i < len(runes) && runes[i] == '^'
	if negated {
		i++
	}
	char := func() (rune, error) {
		if i < len(runes) && runes[i] == '\\' {
			i++
		}
		if i >= len(runes) {
			return 0, fmt.Errorf("unterminated character class")
		}
		i++
		return runes[i-1], nil
	}
	var ranges strings.Builder
	for first := true; ; first = false {
		if i >= len(runes) {
			return "", 0, fmt.Errorf("unterminated character class")
		}
		if runes[i] == ']' && !first {
			break
		}
		// A class path.Match rejects (empty, an unescaped '-' at a range end) was
		// refused by validation; the translation only has to be right for valid ones.
		lo, err := char()
		if err != nil {
			return "", 0, err
		}
		hi := lo
		if i < len(runes) && runes[i] == '-' {
			i++
			if hi, err = char(); err != nil {
				return "", 0, err
			}
		}
		switch {
		case hi < lo:
			// path.Match accepts a reversed range and matches nothing with it; RE2
			// refuses it, so it is left out.
		case hi == lo:
			ranges.WriteString(reLiteral(lo))
		default:
			ranges.WriteString(reLiteral(lo) + "-" + reLiteral(hi))
		}
	}
	all := `\x{0}-\x{10ffff}`
	switch {
	case ranges.Len() == 0 && negated:
		return "[" + all + "]", i, nil
	case ranges.Len() == 0:
		return "[^" + all + "]", i, nil
	case negated:
		return "[^" + ranges.String() + "]", i, nil
	}
	return "[" + ranges.String() + "]", i, nil
}

// reLiteral writes r so that RE2 reads it literally, in and out of classes.
func reLiteral(r rune) string {
	if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
		return string(r)
	}
	return `\x{` + strconv.FormatInt(int64(r), 16) + `}`
}

// celCompiler is the allocator's compiler with the features of Kubernetes 1.36 and
// later (consumable capacity), the same environment the scheduler evaluates the class in.
var celCompiler = dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true})

// selectorOptions compile in the environment of new expressions, which the API server
// applies to a DeviceClass that is written.
var selectorOptions = dracel.Options{EnvType: ptr.To(environment.NewExpressions)}

// CompileSelector compiles expr as the API server and the scheduler would, in the
// environment of new expressions, and checks the limits the API server applies to a
// DeviceClass selector: length and estimated cost.
func CompileSelector(expr string) (dracel.CompilationResult, error) {
	if len(expr) > resourceapi.CELSelectorExpressionMaxLength {
		return dracel.CompilationResult{}, fmt.Errorf("expression is %d bytes long, the API allows %d", len(expr), resourceapi.CELSelectorExpressionMaxLength)
	}
	res := celCompiler.CompileCELExpression(expr, selectorOptions)
	if res.Error != nil {
		return res, fmt.Errorf("%s", res.Error.Detail)
	}
	if res.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		return res, fmt.Errorf("estimated cost %d exceeds the API's limit of %d; simplify the expression or use fewer selector values",
			res.MaxCost, resourceapi.CELSelectorExpressionMaxCost)
	}
	return res, nil
}
