package nccltopo

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// The files the cpu elements are read from, relative to the sysfs root.
const (
	// modaliasFile names the boot CPU: "cpu:type:x86,ven0000fam0006mod008F:feature:..."
	// on x86 (vendor, family and model as the kernel's cpuinfo_x86 holds them, in hex),
	// "cpu:type:aarch64:feature:..." on arm64.
	modaliasFile = "devices/system/cpu/modalias"
	// nodeCPUMap is the CPU mask of one NUMA node, in the format NCCL's affinity takes.
	nodeCPUMap = "devices/system/node/node%d/cpumap"
)

// cpuInfo is what every cpu element carries besides its NUMA node: what NCCL's
// ncclTopoAddCpu requires. NCCL fills these itself only for the cpu above the GPU its
// process drives, so a cpu that holds only NICs must carry them in the file.
type cpuInfo struct {
	arch     string // x86_64, arm64
	vendor   string // the CPUID vendor string, x86 only
	familyID int    // x86 only
	modelID  int    // x86 only
}

// x86Vendors maps the kernel's X86_VENDOR_* numbers to the CPUID vendor strings NCCL
// compares against (kvDictCpuVendor). Vendors NCCL does not know are still passed on, as
// NCCL would read them with CPUID itself.
var x86Vendors = map[int]string{
	0:  "GenuineIntel",
	2:  "AuthenticAMD",
	5:  "CentaurHauls",
	9:  "HygonGenuine",
	10: "  Shanghai  ",
}

// parseModalias parses the CPU modalias of modaliasFile into what a cpu element needs.
// Family and model are the kernel's: base family plus extended family for family 0xf,
// base model plus extended model for family 6 and up, which is what NCCL computes from
// CPUID on every x86 CPU it knows.
func parseModalias(s string) (cpuInfo, error) {
	rest, ok := strings.CutPrefix(s, "cpu:type:")
	if !ok {
		return cpuInfo{}, fmt.Errorf("%w: %q, want cpu:type:<type>:feature:<list>", sysfs.ErrSyntax, clip(s))
	}
	typ, _, _ := strings.Cut(rest, ":")
	switch {
	case typ == "aarch64":
		return cpuInfo{arch: "arm64"}, nil
	case strings.HasPrefix(typ, "x86,"):
		return parseX86(typ, s)
	}
	return cpuInfo{}, fmt.Errorf("%w: CPU type %q in %q, want x86,ven<v>fam<f>mod<m> or aarch64 (the architectures NCCL runs on with a modalias)", sysfs.ErrSyntax, clip(typ), clip(s))
}

// parseX86 parses "x86,venVVVVfamFFFFmodMMMM" (CPU_FEATURE_TYPEFMT of arch/x86).
func parseX86(typ, s string) (cpuInfo, error) {
	const want = "x86,ven<4 hex>fam<4 hex>mod<4 hex>"
	f := strings.TrimPrefix(typ, "x86,")
	if len(f) != 3*7 || f[0:3] != "ven" || f[7:10] != "fam" || f[14:17] != "mod" {
		return cpuInfo{}, fmt.Errorf("%w: %q, want %s", sysfs.ErrSyntax, clip(s), want)
	}
	var v [3]int
	for i, h := range []string{f[3:7], f[10:14], f[17:21]} {
		n, err := strconv.ParseUint(h, 16, 16)
		if err != nil {
			return cpuInfo{}, fmt.Errorf("%w: %q, want %s", sysfs.ErrSyntax, clip(s), want)
		}
		v[i] = int(n)
	}
	vendor, ok := x86Vendors[v[0]]
	if !ok {
		return cpuInfo{}, fmt.Errorf("%w: x86 vendor number %d in %q is not one the kernel gives a name NCCL knows", sysfs.ErrSyntax, v[0], clip(s))
	}
	return cpuInfo{arch: "x86_64", vendor: vendor, familyID: v[1], modelID: v[2]}, nil
}

// attrs are the element's attributes after numaid and affinity, in NCCL's order.
func (c cpuInfo) attrs() []attr {
	a := []attr{{"arch", c.arch}}
	if c.arch == "x86_64" {
		a = append(a, attr{"vendor", c.vendor}, attr{"familyid", strconv.Itoa(c.familyID)}, attr{"modelid", strconv.Itoa(c.modelID)})
	}
	return a
}

// parseCPUMap parses a NUMA node's cpumap ("0000,00000000,000000ff,ffffffff":
// comma-separated 32-bit words in hex, the highest CPUs first), which is also how NCCL's
// affinity attribute is written, and returns it without its leading all-zero words: they
// name no CPU, and a machine with many possible CPUs would otherwise exceed what NCCL
// reads. The kernel prints the highest word only as wide as the possible CPUs need
// (lib/vsprintf.c, bitmap_string): 144 CPUs give a first word of 4 digits, 56 one of 6.
// NCCL reads words of any width (ncclStrToCpuset), and writes what sysfs says.
func parseCPUMap(s string) (string, error) {
	const want = "comma-separated words of 8 hex digits, the first of 1 to 8"
	words := strings.Split(s, ",")
	for i, w := range words {
		if len(w) > 8 || (i > 0 && len(w) != 8) || !isLowerHex(w) {
			return "", fmt.Errorf("%w: %q, want %s", sysfs.ErrSyntax, clip(s), want)
		}
	}
	i := 0
	for i < len(words)-1 && strings.Trim(words[i], "0") == "" {
		i++
	}
	return strings.Join(words[i:], ","), nil
}

// clip shortens a value quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return len(s) > 0
}
