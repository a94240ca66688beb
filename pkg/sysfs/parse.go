package sysfs

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every parse error: the value is not in the format sysfs.md gives.
var ErrSyntax = errors.New("unexpected format")

// syntaxError says which value was wrong and what was expected; Read adds the file.
func syntaxError(s, want string) error {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Errorf("%w: %q, want %s", ErrSyntax, s, want)
}

// Read reads the file name and parses its content (without the trailing newline) with
// parse. A parse error names the file and, through the parser, the content.
func Read[T any](f *FS, name string, parse func(string) (T, error)) (T, error) {
	s, err := f.ReadString(name)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(s)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("parse %s: %w", name, err)
	}
	return v, nil
}

// portStates are the names of ports/<p>/state, indexed by their number (enum ib_port_state).
var portStates = []string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// physStates are the names of ports/<p>/phys_state, indexed by their number; 0 has none.
var physStates = []string{"", "Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "Phy Test"}

// ParsePortState parses ports/<p>/state ("4: ACTIVE") and returns the state's name. The
// number and the name must agree.
func ParsePortState(s string) (string, error) {
	return parseNumberedName(s, portStates, "<number>: <port state>")
}

// ParsePhysState parses ports/<p>/phys_state ("5: LinkUp") and returns the state's name.
// The number and the name must agree.
func ParsePhysState(s string) (string, error) {
	return parseNumberedName(s, physStates, "<number>: <physical state>")
}

// parseNumberedName parses "%d: %s" where names[%d] must be %s.
func parseNumberedName(s string, names []string, want string) (string, error) {
	num, name, err := splitNumbered(s, want)
	if err != nil {
		return "", err
	}
	if num >= len(names) || names[num] == "" || names[num] != name {
		return "", syntaxError(s, want)
	}
	return name, nil
}

// splitNumbered splits "%d: %s" into its number and non-empty name.
func splitNumbered(s, want string) (int, string, error) {
	numText, name, ok := strings.Cut(s, ": ")
	if !ok || name == "" || strings.TrimSpace(name) != name {
		return 0, "", syntaxError(s, want)
	}
	num, err := parseDecimal(numText)
	if err != nil {
		return 0, "", syntaxError(s, want)
	}
	return num, name, nil
}

// NodeType is the parsed node_type of an RDMA device.
type NodeType struct {
	// Code is the kernel's number: 1 CA, 2 switch, 3 router, 4 RNIC (iWARP), ...
	Code int
	// Name is the kernel's name for Code.
	Name string
}

// Node types of interest to discovery.
const (
	NodeTypeCA   = 1
	NodeTypeRNIC = 4
)

// ParseNodeType parses node_type ("1: CA").
func ParseNodeType(s string) (NodeType, error) {
	num, name, err := splitNumbered(s, "<number>: <node type>")
	if err != nil {
		return NodeType{}, err
	}
	return NodeType{Code: num, Name: name}, nil
}

// ParseRate parses ports/<p>/rate ("400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)") and
// returns the speed in whole Gb/s: a fraction is dropped (2.5 is 2).
func ParseRate(s string) (int, error) {
	const want = `"<number>[.<digits>] Gb/sec (<width>X <speed>)"`
	num, rest, ok := strings.Cut(s, " Gb/sec")
	if !ok {
		return 0, syntaxError(s, want)
	}
	if rest != "" {
		// The width and speed in parentheses only describe the number; check their shape.
		inner, ok := strings.CutPrefix(rest, " (")
		if !ok || !strings.HasSuffix(inner, ")") {
			return 0, syntaxError(s, want)
		}
		width, _, ok := strings.Cut(strings.TrimSuffix(inner, ")"), "X")
		if !ok {
			return 0, syntaxError(s, want)
		}
		if _, err := parseDecimal(width); err != nil {
			return 0, syntaxError(s, want)
		}
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	if hasFrac && (frac == "" || strings.Trim(frac, "0123456789") != "") {
		return 0, syntaxError(s, want)
	}
	gbps, err := parseDecimal(whole)
	if err != nil {
		return 0, syntaxError(s, want)
	}
	return gbps, nil
}

// Link layers as ports/<p>/link_layer spells them.
const (
	LinkLayerInfiniBand = "InfiniBand"
	LinkLayerEthernet   = "Ethernet"
	LinkLayerUnknown    = "Unknown"
)

// ParseLinkLayer parses ports/<p>/link_layer.
func ParseLinkLayer(s string) (string, error) {
	switch s {
	case LinkLayerInfiniBand, LinkLayerEthernet, LinkLayerUnknown:
		return s, nil
	}
	return "", syntaxError(s, "InfiniBand, Ethernet or Unknown")
}

// DevNumber is a character device's number as a dev file holds it.
type DevNumber struct {
	Major, Minor uint32
}

// String returns "major:minor".
func (d DevNumber) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// ParseDevNumber parses a dev file ("231:192"). Linux majors have 12 bits, minors 20.
func ParseDevNumber(s string) (DevNumber, error) {
	const want = "<major>:<minor>"
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return DevNumber{}, syntaxError(s, want)
	}
	major, err := parseDecimal(maj)
	if err != nil || major >= 1<<12 {
		return DevNumber{}, syntaxError(s, want)
	}
	minor, err := parseDecimal(min)
	if err != nil || minor >= 1<<20 {
		return DevNumber{}, syntaxError(s, want)
	}
	return DevNumber{Major: uint32(major), Minor: uint32(minor)}, nil
}

// ParsePCIID parses a PCI vendor or device ID file ("0x15b3") and returns four lower-case
// hex digits without 0x ("15b3").
func ParsePCIID(s string) (string, error) {
	return parseHexDigits(s, 4, "0x<4 hex digits>")
}

// ParsePCIClass parses a PCI class file ("0x020700") and returns the 24-bit class code.
func ParsePCIClass(s string) (uint32, error) {
	h, err := parseHexDigits(s, 6, "0x<6 hex digits>")
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return 0, syntaxError(s, "0x<6 hex digits>")
	}
	return uint32(v), nil
}

// parseHexDigits checks "0x" followed by exactly n hex digits and returns them lower-cased.
func parseHexDigits(s string, n int, want string) (string, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) != n || !isHex(h) {
		return "", syntaxError(s, want)
	}
	return strings.ToLower(h), nil
}

// ParseNUMANode parses numa_node. ok is false when the kernel does not know the node (-1).
func ParseNUMANode(s string) (node int, ok bool, err error) {
	if s == "-1" {
		return 0, false, nil
	}
	n, err := parseDecimal(s)
	if err != nil {
		return 0, false, syntaxError(s, "a NUMA node number or -1")
	}
	return n, true, nil
}

// ParseGUID parses node_guid or sys_image_guid ("7c8c:0903:00c3:cfee") and returns it in
// lower case.
func ParseGUID(s string) (string, error) {
	const want = "four groups of four hex digits separated by ':'"
	if len(s) != 19 {
		return "", syntaxError(s, want)
	}
	for i := 0; i < 4; i++ {
		if !isHex(s[i*5:i*5+4]) || (i < 3 && s[i*5+4] != ':') {
			return "", syntaxError(s, want)
		}
	}
	return strings.ToLower(s), nil
}

// ParseBondSlaves parses bonding/slaves: space-separated interface names, possibly none.
func ParseBondSlaves(s string) ([]string, error) {
	names := strings.Fields(s)
	for _, n := range names {
		if _, err := ParseIfName(n); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// ParseNetnsMode parses module/ib_core/parameters/netns_mode: Y is shared, N exclusive.
func ParseNetnsMode(s string) (shared bool, err error) {
	switch s {
	case "Y":
		return true, nil
	case "N":
		return false, nil
	}
	return false, syntaxError(s, "Y or N")
}

// ParseTaint parses module/<name>/taint: the module's taint flags, one upper-case letter
// each (P proprietary licence, O out of tree, E unsigned, ...), possibly none.
func ParseTaint(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return "", syntaxError(s, "taint flags, upper-case letters such as PO or OE")
		}
	}
	return s, nil
}

// ParseLID parses ports/<p>/lid or sm_lid ("0x538"): a 16-bit local identifier.
func ParseLID(s string) (uint16, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || h == "" || len(h) > 4 || !isHex(h) {
		return 0, syntaxError(s, "0x<up to 4 hex digits>")
	}
	v, _ := strconv.ParseUint(h, 16, 16) // cannot fail: at most four hex digits
	return uint16(v), nil
}

// ParseDecimal parses a non-negative decimal file such as mtu, dev_port, type or a port
// number.
func ParseDecimal(s string) (int, error) {
	n, err := parseDecimal(s)
	if err != nil {
		return 0, syntaxError(s, "a non-negative decimal number")
	}
	return n, nil
}

// ParseCounter parses a port counter (ports/<p>/counters/<name> and
// ports/<p>/hw_counters/<name>): an unsigned decimal number of up to 64 bits, as the
// kernel prints it (%u, %llu). Anything else, such as the "N/A (no PMA)" the kernel
// prints when the adapter does not answer the query, is a syntax error. It takes the
// bytes of a read as well as a string, so that a reader of hundreds of counters per scrape
// need not copy each one.
func ParseCounter[T string | []byte](s T) (uint64, error) {
	if len(s) == 0 || len(s) > 20 {
		return 0, syntaxError(string(s), "an unsigned decimal number of up to 64 bits")
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, syntaxError(string(s), "an unsigned decimal number of up to 64 bits")
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, syntaxError(string(s), "an unsigned decimal number of up to 64 bits")
		}
		v = v*10 + d
	}
	return v, nil
}

// ParseIfName parses a file that holds a network interface name (gid_attrs/ndevs/<i>,
// parent). Names become path components, so anything that is not a kernel interface name
// (1 to 15 bytes, no '/', no white space, not . or ..) is refused.
func ParseIfName(s string) (string, error) {
	return parseName(s, 15, "a network interface name")
}

// ParseDeviceName parses a file that holds an RDMA device name (ibdev of a uverbs, umad
// or issm device). The kernel allows 63 bytes; the same path rules as ParseIfName apply.
func ParseDeviceName(s string) (string, error) {
	return parseName(s, 63, "an RDMA device name")
}

func parseName(s string, max int, want string) (string, error) {
	if s == "" || len(s) > max || s == "." || s == ".." || strings.ContainsAny(s, "/: \t\n\r\x00") {
		return "", syntaxError(s, want)
	}
	return s, nil
}

// parseDecimal accepts only plain decimal digits (no sign, no spaces) that fit an int.
func parseDecimal(s string) (int, error) {
	if s == "" || len(s) > 9 || strings.Trim(s, "0123456789") != "" {
		return 0, ErrSyntax
	}
	return strconv.Atoi(s)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}
