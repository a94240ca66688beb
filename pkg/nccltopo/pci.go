package nccltopo

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// pciDevices is where every PCI function is linked by its bus ID.
const pciDevices = "bus/pci/devices/"

// checkBusID reports whether s is a PCI bus ID as sysfs names functions: a domain of at
// least four hex digits (VMD domains have five), bus, device and function, lower case,
// e.g. 0000:3b:00.0. NCCL compares bus IDs as strings in this spelling.
func checkBusID(s string) error {
	dom, rest, ok := strings.Cut(s, ":")
	if ok && len(dom) >= 4 && len(dom) <= 8 && isLowerHex(dom) && len(rest) == 7 && rest[2] == ':' && rest[5] == '.' &&
		isLowerHex(rest[0:2]) && isLowerHex(rest[3:5]) && '0' <= rest[6] && rest[6] <= '7' {
		dev, _ := strconv.ParseUint(rest[3:5], 16, 8)
		if dev < 32 {
			return nil
		}
	}
	return fmt.Errorf("malformed PCI bus ID %q, want <domain>:<bus>:<device>.<function> in lower-case hex as sysfs spells it, e.g. 0000:3b:00.0", clip(s))
}

// isBDF reports whether a path component is what NCCL takes for a PCI function while it
// walks up a device's sysfs path (checkBDFFormat): exactly DDDD:BB:DD.F in hex. At the
// first component that is not, such as the root complex pci0000:00 or a VMD domain's
// pci10000:00, NCCL stops and puts a cpu element there; so does this package.
func isBDF(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	return isHexAny(s[0:4]) && isHexAny(s[5:7]) && isHexAny(s[8:10]) && isHexAny(s[11:12])
}

func isHexAny(s string) bool { return isLowerHex(strings.ToLower(s)) }

// chain returns the canonical directories of the PCI functions from the topmost one below
// the root complex down to the function busID itself.
func chain(fsys *sysfs.FS, busID string) ([]string, error) {
	link := pciDevices + busID
	canon, err := fsys.Resolve(link)
	if err != nil {
		if namesPath(err, link) {
			return nil, err
		}
		return nil, fmt.Errorf("resolve %s: %w", link, err)
	}
	parts := strings.Split(canon, "/")
	if len(parts) < 3 || parts[0] != "devices" || parts[len(parts)-1] != busID {
		return nil, fmt.Errorf("%s resolves to %s, want devices/<root complex>/.../%s", link, canon, busID)
	}
	top := len(parts) - 1
	for top > 1 && isBDF(parts[top-1]) {
		top--
	}
	dirs := make([]string, 0, len(parts)-top)
	for i := top; i < len(parts); i++ {
		dirs = append(dirs, strings.Join(parts[:i+1], "/"))
	}
	return dirs, nil
}

// function is what a pci element says about one PCI function, as written.
type function struct {
	busID                string
	class                uint32
	vendor, device       string // 0x15b3
	subVendor, subDevice string
	linkSpeed, linkWidth string
	numa                 int // -1 when the kernel does not know
}

// readFunction reads the function at the canonical directory dir.
func readFunction(fsys *sysfs.FS, dir string) (*function, error) {
	f := &function{busID: path.Base(dir)}
	var err error
	if f.class, err = read(fsys, dir+"/class", sysfs.ParsePCIClass); err != nil {
		return nil, err
	}
	for _, id := range []struct {
		file string
		dst  *string
	}{{"vendor", &f.vendor}, {"device", &f.device}, {"subsystem_vendor", &f.subVendor}, {"subsystem_device", &f.subDevice}} {
		v, err := read(fsys, dir+"/"+id.file, sysfs.ParsePCIID)
		if err != nil {
			return nil, err
		}
		*id.dst = "0x" + v
	}
	if f.linkSpeed, f.linkWidth, err = link(fsys, dir); err != nil {
		return nil, err
	}
	f.numa, err = readOptional(fsys, dir+"/numa_node", -1, func(s string) (int, error) {
		n, ok, err := sysfs.ParseNUMANode(s)
		if !ok {
			n = -1
		}
		return n, err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// link returns a function's link_speed and link_width the way NCCL's own sysfs detection
// does (ncclTopoGetXmlFromSys): the slower of max_link_speed of the function and of the
// port above it (its parent directory), and the narrower of their max_link_width. A file
// that does not exist (a conventional PCI device, a root complex) leaves its side out; with
// neither side the speed is "" and the width "0", which NCCL reads as Gen3 and x16, as it
// does when it finds no files itself.
//
// max_*, not current_*: NCCL takes the file's values as they are and does not read sysfs
// again, and the current link of an idle GPU is often trained down to 2.5 GT/s to save
// power; the capability is what the link gives once traffic flows.
func link(fsys *sysfs.FS, dir string) (speed, width string, err error) {
	// The speed goes into the file as sysfs prints it, as NCCL writes it.
	text := func(s string) (string, error) {
		if err := checkValue(s); err != nil {
			return "", fmt.Errorf("%w: %q: %v", sysfs.ErrSyntax, clip(s), err)
		}
		return s, nil
	}
	devSpeed, err := readOptional(fsys, dir+"/max_link_speed", "", text)
	if err != nil {
		return "", "", err
	}
	portSpeed, err := readOptional(fsys, path.Dir(dir)+"/max_link_speed", "", text)
	if err != nil {
		return "", "", err
	}
	speed = devSpeed
	if gtps(portSpeed) < gtps(devSpeed) {
		speed = portSpeed
	}
	devWidth, err := readOptional(fsys, dir+"/max_link_width", -1, sysfs.ParseDecimal)
	if err != nil {
		return "", "", err
	}
	portWidth, err := readOptional(fsys, path.Dir(dir)+"/max_link_width", -1, sysfs.ParseDecimal)
	if err != nil {
		return "", "", err
	}
	w := devWidth
	if w < 0 || (portWidth >= 0 && portWidth < w) {
		w = portWidth
	}
	return speed, strconv.Itoa(max(w, 0)), nil
}

// gtps parses the leading "<float> GT/s" of a link speed ("16.0 GT/s PCIe", "8 GT/s");
// anything else is unknown and compares as infinitely fast, as in NCCL.
func gtps(s string) float64 {
	num, rest, ok := strings.Cut(s, " ")
	if !ok || !strings.HasPrefix(rest, "GT/s") {
		return math.Inf(1)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsNaN(v) {
		return math.Inf(1)
	}
	return v
}

// read reads and parses name; every error names the file (sysfs names the directory it
// could not find, a parse error the file already).
func read[T any](fsys *sysfs.FS, name string, parse func(string) (T, error)) (T, error) {
	v, err := sysfs.Read(fsys, name, parse)
	if err != nil && !errors.Is(err, sysfs.ErrSyntax) && !namesPath(err, name) {
		return v, fmt.Errorf("read %s: %w", name, err)
	}
	return v, err
}

// namesPath reports whether err is a path error about name itself.
func namesPath(err error, name string) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Path == name
}

// readOptional is read where a file that does not exist gives def.
func readOptional[T any](fsys *sysfs.FS, name string, def T, parse func(string) (T, error)) (T, error) {
	v, err := read(fsys, name, parse)
	if errors.Is(err, fs.ErrNotExist) {
		return def, nil
	}
	return v, err
}
