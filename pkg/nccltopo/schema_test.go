package nccltopo

import (
	"encoding/xml"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The types below accept what NCCL's topology loader accepts and nothing else: the
// elements its handlers take and their nesting (ncclTopoXmlLoadSystem, ...Cpu, ...Pci,
// ...Gpu, ...Nic, ...Net in src/graph/xml.cc) and the attributes src/graph/topo.cc and
// xml.cc read from them. NCCL itself skips an element it does not know; the test fails on
// one, and on any other attribute or on text, so that the file holds nothing NCCL drops.

// rest collects what a type does not name.
type rest struct {
	Attrs []xml.Attr `xml:",any,attr"`
	Elems []xAny     `xml:",any"`
	Text  string     `xml:",chardata"`
}

type xAny struct{ XMLName xml.Name }

type xSystem struct {
	XMLName xml.Name `xml:"system"`
	Version *string  `xml:"version,attr"`
	Name    *string  `xml:"name,attr"`
	CPUs    []xCPU   `xml:"cpu"`
	rest
}

type xCPU struct {
	NUMAID   *string `xml:"numaid,attr"`
	Affinity *string `xml:"affinity,attr"`
	Arch     *string `xml:"arch,attr"`
	Vendor   *string `xml:"vendor,attr"`
	FamilyID *string `xml:"familyid,attr"`
	ModelID  *string `xml:"modelid,attr"`
	HostHash *string `xml:"host_hash,attr"` // NCCL overwrites it
	PCIs     []xPCI  `xml:"pci"`
	NICs     []xNIC  `xml:"nic"`
	rest
}

type xPCI struct {
	BusID           *string    `xml:"busid,attr"`
	Class           *string    `xml:"class,attr"`
	Vendor          *string    `xml:"vendor,attr"`
	Device          *string    `xml:"device,attr"`
	SubsystemVendor *string    `xml:"subsystem_vendor,attr"`
	SubsystemDevice *string    `xml:"subsystem_device,attr"`
	LinkSpeed       *string    `xml:"link_speed,attr"`
	LinkWidth       *string    `xml:"link_width,attr"`
	PCIs            []xPCI     `xml:"pci"`
	GPUs            []xGPU     `xml:"gpu"`
	NICs            []xNIC     `xml:"nic"`
	PCILinks        []xPCILink `xml:"pcilink"`
	rest
}

type xGPU struct {
	Dev     *string   `xml:"dev,attr"`
	SM      *string   `xml:"sm,attr"`
	Rank    *string   `xml:"rank,attr"`
	GDR     *string   `xml:"gdr,attr"`
	MLOPart *string   `xml:"mlopart,attr"`
	NVLinks []xNVLink `xml:"nvlink"`
	C2Cs    []xC2C    `xml:"c2c"`
	rest
}

type xNVLink struct {
	Target *string `xml:"target,attr"`
	Count  *string `xml:"count,attr"`
	TClass *string `xml:"tclass,attr"`
	rest
}

type xC2C struct {
	BW    *string `xml:"bw,attr"`
	Count *string `xml:"count,attr"`
	rest
}

type xPCILink struct {
	Target *string `xml:"target,attr"`
	rest
}

type xNIC struct {
	Nets []xNet `xml:"net"`
	rest
}

type xNet struct {
	Name    *string `xml:"name,attr"`
	Dev     *string `xml:"dev,attr"`
	Speed   *string `xml:"speed,attr"`
	Port    *string `xml:"port,attr"`
	Latency *string `xml:"latency,attr"`
	GUID    *string `xml:"guid,attr"`
	MaxConn *string `xml:"maxconn,attr"`
	GDR     *string `xml:"gdr,attr"`
	Coll    *string `xml:"coll,attr"`
	Net     *string `xml:"net,attr"`
	GIN     *string `xml:"gin,attr"`
	RMA     *string `xml:"rma,attr"`
	Rail    *string `xml:"rail,attr"`
	Plane   *string `xml:"plane,attr"`
	rest
}

// parseSchema decodes b and checks it against the types above and the attribute rules of
// NCCL's topology code (required attributes, their formats).
func parseSchema(b []byte) (*xSystem, error) {
	var s xSystem
	if err := xml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var errs []error
	bad := func(where, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
	}
	checkRest := func(where string, r rest) {
		for _, a := range r.Attrs {
			bad(where, "attribute %s is not one NCCL reads", a.Name.Local)
		}
		for _, e := range r.Elems {
			bad(where, "element <%s> is not one NCCL loads here", e.XMLName.Local)
		}
		if strings.TrimSpace(r.Text) != "" {
			bad(where, "text %q", strings.TrimSpace(r.Text))
		}
	}
	// required mirrors xmlGetAttrStr: the attribute must be there.
	required := func(where, name string, v *string, valid func(string) bool) {
		switch {
		case v == nil:
			bad(where, "attribute %s missing, NCCL requires it", name)
		case valid != nil && !valid(*v):
			bad(where, "attribute %s=%q malformed", name, *v)
		}
	}
	optional := func(where, name string, v *string, valid func(string) bool) {
		if v != nil {
			required(where, name, v, valid)
		}
	}
	checkRest("system", s.rest)
	required("system", "version", s.Version, func(v string) bool { return v == strconv.Itoa(XMLVersion) })
	checkNIC := func(where string, n xNIC) {
		checkRest(where+"/nic", n.rest)
		for _, net := range n.Nets {
			w := where + "/nic/net"
			checkRest(w, net.rest)
			required(w, "name", net.Name, func(v string) bool { return v != "" })
		}
	}
	var checkPCI func(where string, p xPCI)
	checkPCI = func(where string, p xPCI) {
		w := where + "/pci"
		if p.BusID != nil {
			w += "[" + *p.BusID + "]"
		}
		checkRest(w, p.rest)
		required(w, "busid", p.BusID, func(v string) bool { return checkBusID(v) == nil })
		required(w, "class", p.Class, classRE.MatchString)
		for _, id := range []struct {
			name string
			v    *string
		}{{"vendor", p.Vendor}, {"device", p.Device}, {"subsystem_vendor", p.SubsystemVendor}, {"subsystem_device", p.SubsystemDevice}} {
			optional(w, id.name, id.v, idRE.MatchString)
		}
		required(w, "link_speed", p.LinkSpeed, nil)
		required(w, "link_width", p.LinkWidth, isDecimal)
		if len(p.NICs) > 1 {
			bad(w, "%d nic elements, NCCL reads the first", len(p.NICs))
		}
		if len(p.NICs) > 0 && len(p.PCIs) > 0 {
			bad(w, "pci elements below a NIC, NCCL does not read them")
		}
		for _, n := range p.NICs {
			checkNIC(w, n)
		}
		for _, g := range p.GPUs {
			checkRest(w+"/gpu", g.rest)
		}
		for _, l := range p.PCILinks {
			checkRest(w+"/pcilink", l.rest)
		}
		for _, c := range p.PCIs {
			checkPCI(w, c)
		}
	}
	for _, c := range s.CPUs {
		w := "system/cpu"
		if c.NUMAID != nil {
			w += "[" + *c.NUMAID + "]"
		}
		checkRest(w, c.rest)
		required(w, "numaid", c.NUMAID, isInt)
		optional(w, "affinity", c.Affinity, cpuMaskRE.MatchString)
		required(w, "arch", c.Arch, func(v string) bool { return v == "x86_64" || v == "arm64" || v == "ppc64" })
		if c.Arch != nil && *c.Arch == "x86_64" {
			required(w, "vendor", c.Vendor, nil)
			if c.Vendor != nil && (*c.Vendor == "GenuineIntel" || *c.Vendor == "  Shanghai  " || *c.Vendor == "CentaurHauls") {
				required(w, "familyid", c.FamilyID, isInt)
				required(w, "modelid", c.ModelID, isInt)
			}
		}
		for _, p := range c.PCIs {
			checkPCI(w, p)
		}
		for _, n := range c.NICs {
			checkNIC(w, n)
		}
	}
	return &s, errors.Join(errs...)
}

var (
	classRE   = regexp.MustCompile(`^0x[0-9a-f]{6}$`)
	idRE      = regexp.MustCompile(`^0x[0-9a-f]{4}$`)
	cpuMaskRE = regexp.MustCompile(`^[0-9a-f]{1,8}(,[0-9a-f]{8})*$`)
	// attrPairRE is one attribute of a line that lineRE accepted.
	attrPairRE = regexp.MustCompile(` ([a-z_]+)="([^"]*)"`)
)

func isDecimal(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && strconv.Itoa(n) == s
}

func isInt(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && strconv.Itoa(n) == s
}

// lineRE is one line of the file as NCCL's hand-written reader takes it (xmlGetNode,
// xmlGetToken, xmlGetValue): indentation of spaces only (it skips ' ', '\n' and '\r'
// between elements, not tabs), a tag whose attributes are each preceded by exactly one
// space with the value in double quotes (a second space or a line break inside a tag ends
// the attribute list), closed by '>' or "/>". No XML declaration ("<?xml ...?>" stops the
// reader at '?') and no text; no comments either, which NCCL skips but the file has no use
// for.
var lineRE = regexp.MustCompile(`^ *<(/?)([a-z_]+)((?: [a-z_]+="[^"]*")*)(/?)>$`)

// checkLexical checks b against NCCL's reader, line by line, and its limits: at most
// maxAttrs attributes an element, MaxValueLen bytes a value.
func checkLexical(b []byte) error {
	s := string(b)
	if !strings.HasSuffix(s, "\n") {
		return errors.New("file does not end with a line break")
	}
	if !strings.HasPrefix(s, "<system ") {
		return fmt.Errorf("file starts with %q, want <system", s[:min(len(s), 20)])
	}
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			return fmt.Errorf("line %d %q: not one tag as NCCL reads it", i+1, line)
		}
		attrs := attrPairRE.FindAllStringSubmatch(m[3], -1)
		if len(attrs) > maxAttrs {
			return fmt.Errorf("line %d: %d attributes, NCCL keeps %d", i+1, len(attrs), maxAttrs)
		}
		for _, a := range attrs {
			if len(a[2]) > MaxValueLen {
				return fmt.Errorf("line %d: %s is %d bytes, NCCL reads %d", i+1, a[1], len(a[2]), MaxValueLen)
			}
			if strings.ContainsAny(a[2], "&<>") {
				return fmt.Errorf("line %d: %s=%q holds a character XML escapes and NCCL does not unescape", i+1, a[1], a[2])
			}
		}
	}
	return nil
}

// outline is the file's shape in one line per endpoint: the NUMA node, the bus IDs from
// the top function down, and what sits at the end ("gpu" for a display-class function,
// "net=a,b" for a nic).
func outline(s *xSystem) []string {
	var out []string
	var walk func(prefix string, p xPCI)
	walk = func(prefix string, p xPCI) {
		prefix += " " + deref(p.BusID)
		for _, n := range p.NICs {
			var names []string
			for _, net := range n.Nets {
				names = append(names, deref(net.Name))
			}
			out = append(out, prefix+" net="+strings.Join(names, ","))
		}
		if len(p.PCIs) == 0 && len(p.NICs) == 0 && strings.HasPrefix(deref(p.Class), "0x03") {
			out = append(out, prefix+" gpu")
		}
		for _, c := range p.PCIs {
			walk(prefix, c)
		}
	}
	for _, c := range s.CPUs {
		for _, p := range c.PCIs {
			walk("numa"+deref(c.NUMAID)+":", p)
		}
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestSchemaRejects checks the checks: each file here is one NCCL would refuse or read
// differently from what it says, and one of the two checks must say so.
func TestSchemaRejects(t *testing.T) {
	const (
		cpu = `  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">` + "\n"
		pci = `    <pci busid="0000:18:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">` + "\n"
		end = "    </pci>\n  </cpu>\n</system>\n"
		net = "      <nic>\n        <net name=\"mlx5_0\"/>\n      </nic>\n"
	)
	good := "<system version=\"1\">\n" + cpu + pci + net + end
	if err := checkLexical([]byte(good)); err != nil {
		t.Fatalf("the good file fails the reader check: %v", err)
	}
	if _, err := parseSchema([]byte(good)); err != nil {
		t.Fatalf("the good file fails the schema: %v", err)
	}
	bad := map[string]string{
		"XML declaration":       "<?xml version=\"1.0\"?>\n" + good,
		"tab indentation":       strings.Replace(good, "  <cpu", "\t<cpu", 1),
		"two spaces in a tag":   strings.Replace(good, `numaid="0" arch`, `numaid="0"  arch`, 1),
		"single quotes":         strings.Replace(good, `numaid="0"`, `numaid='0'`, 1), // NCCL 2.6 reads '"' only
		"wrong version":         strings.Replace(good, `version="1"`, `version="2"`, 1),
		"no link_width":         strings.Replace(good, ` link_width="16"`, "", 1),
		"no class":              strings.Replace(good, ` class="0x020700"`, "", 1),
		"no arch":               strings.Replace(good, ` arch="x86_64"`, "", 1),
		"intel without model":   strings.Replace(good, ` modelid="143"`, "", 1),
		"upper-case bus ID":     strings.Replace(good, "0000:18:00.0", "0000:1A:00.0", 1),
		"unknown attribute":     strings.Replace(good, `<net name="mlx5_0"/>`, `<net name="mlx5_0" speeds="1"/>`, 1),
		"net without a nic":     strings.Replace(good, net, "      <net name=\"mlx5_0\"/>\n", 1),
		"gpu below a cpu":       strings.Replace(good, pci, "    <gpu/>\n"+pci, 1),
		"unknown element":       strings.Replace(good, net, "      <switch/>\n"+net, 1),
		"text":                  strings.Replace(good, net, "      mlx5_0\n"+net, 1),
		"pci below a nic":       strings.Replace(good, net, net+"      <pci busid=\"0000:19:00.0\" class=\"0x060400\" link_speed=\"\" link_width=\"0\"/>\n", 1),
		"ampersand in a value":  strings.Replace(good, `name="mlx5_0"`, `name="a&amp;b"`, 1),
		"value longer than 253": strings.Replace(good, `name="mlx5_0"`, `name="`+strings.Repeat("x", 254)+`"`, 1),
	}
	for name, file := range bad {
		t.Run(name, func(t *testing.T) {
			lexErr := checkLexical([]byte(file))
			_, schemaErr := parseSchema([]byte(file))
			if lexErr == nil && schemaErr == nil {
				t.Errorf("both checks accept:\n%s", file)
			}
		})
	}
}
