package mocknode

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The formats of sysfs.md, checked independently of the code that writes them.
var (
	reGID      = regexp.MustCompile(`^([0-9a-f]{4}:){7}[0-9a-f]{4}$`)
	reGUID     = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}$`)
	reDev      = regexp.MustCompile(`^\d+:\d+$`)
	reHex4     = regexp.MustCompile(`^0x[0-9a-f]{4}$`)
	reHex6     = regexp.MustCompile(`^0x[0-9a-f]{6}$`)
	reLID      = regexp.MustCompile(`^0x[0-9a-f]+$`)
	reState    = regexp.MustCompile(`^[0-5]: (NOP|DOWN|INIT|ARMED|ACTIVE|ACTIVE_DEFER)$`)
	rePhys     = regexp.MustCompile(`^[1-7]: (Sleep|Polling|Disabled|PortConfigurationTraining|LinkUp|LinkErrorRecovery|Phy Test)$`)
	reRate     = regexp.MustCompile(`^\d+(\.5)? Gb/sec \(\d+X [A-Z]+\)$`)
	reBDF      = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	rePCIPath  = regexp.MustCompile(`^devices/pci[0-9a-f]{4}:[0-9a-f]{2}(/[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])+$`)
	reNodeType = regexp.MustCompile(`^\d+: [A-Z]+$`)
	reCounter  = regexp.MustCompile(`^(0|[1-9][0-9]{0,19})$`)
	// The platform files of nccl-topology.md: the kernel's link speeds and widths, its
	// bitmaps (the highest word as wide as its bits), its CPU modaliases.
	reLinkSpeed = regexp.MustCompile(`^(2\.5|5\.0|8\.0|16\.0|32\.0|64\.0) GT/s PCIe$`)
	reLinkWidth = regexp.MustCompile(`^(1|2|4|8|12|16|32)$`)
	reCPUMap    = regexp.MustCompile(`^[0-9a-f]{1,8}(,[0-9a-f]{8})*$`)
	reModalias  = regexp.MustCompile(`^cpu:type:(x86,ven[0-9A-F]{4}fam[0-9A-F]{4}mod[0-9A-F]{4}|aarch64):feature:(,[0-9A-F]{4})*$`)
)

// checker walks a written tree and collects every violation of sysfs.md.
type checker struct {
	root     string
	problems []string
}

func (c *checker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// read returns a file's single value, failing if the file is not exactly one line.
func (c *checker) read(rel string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(c.root, rel))
	if err != nil {
		c.fail("%s: %v", rel, err)
		return "", false
	}
	return string(b[:max(len(b)-1, 0)]), true
}

// resolve returns the root-relative real path of rel.
func (c *checker) resolve(rel string) (string, bool) {
	real, err := filepath.EvalSymlinks(filepath.Join(c.root, rel))
	if err != nil {
		c.fail("%s: resolve: %v", rel, err)
		return "", false
	}
	r, err := filepath.Rel(c.root, real)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		c.fail("%s: resolves outside the root to %s", rel, real)
		return "", false
	}
	return filepath.ToSlash(r), true
}

// read1 is read without a failure of its own: the callers check the file already.
func (c *checker) read1(rel string) string {
	b, _ := os.ReadFile(filepath.Join(c.root, rel))
	return strings.TrimSuffix(string(b), "\n")
}

func (c *checker) match(rel string, re *regexp.Regexp) string {
	v, ok := c.read(rel)
	if ok && !re.MatchString(v) {
		c.fail("%s: %q does not match %s", rel, v, re)
	}
	return v
}

func (c *checker) list(rel string) []string {
	entries, err := os.ReadDir(filepath.Join(c.root, rel))
	if err != nil {
		c.fail("%s: %v", rel, err)
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// checkTree runs every check on the sysfs tree at root.
func checkTree(root string) []string {
	c := &checker{root: root}
	c.walk()
	if c.problems != nil {
		return c.problems // the class checks below assume sound files and links
	}
	if v, _ := c.read("module/ib_core/parameters/netns_mode"); v != "Y" && v != "N" {
		c.fail("netns_mode %q", v)
	}
	c.pci()
	c.platform()
	c.modules()
	c.ibdevs()
	c.chardevs()
	c.netdevs()
	return c.problems
}

// walk checks what holds for every entry: links are relative and resolve inside the root,
// files hold one value and end with exactly one newline.
func (c *checker) walk() {
	_ = filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			c.fail("walk %s: %v", p, err)
			return nil
		}
		rel, _ := filepath.Rel(c.root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			if filepath.IsAbs(target) {
				c.fail("%s: absolute link %s", rel, target)
			} else if r, err := filepath.Rel(c.root, filepath.Join(filepath.Dir(p), target)); err != nil || strings.HasPrefix(r, "..") {
				c.fail("%s: link %s leaves the root", rel, target)
			}
			c.resolve(rel)
		case d.Type().IsRegular() && d.Name() == "vpd":
			b, _ := os.ReadFile(p)
			c.vpd(rel, b)
		case d.Type().IsRegular():
			b, _ := os.ReadFile(p)
			if !strings.HasSuffix(string(b), "\n") || strings.Count(string(b), "\n") != 1 {
				c.fail("%s: %q is not one value with one trailing newline", rel, b)
			}
		case !d.IsDir():
			c.fail("%s: unexpected file type %v", rel, d.Type())
		}
		return nil
	})
}

func (c *checker) pci() {
	for _, bdf := range c.list("bus/pci/devices") {
		rel := "bus/pci/devices/" + bdf
		target, _ := os.Readlink(filepath.Join(c.root, rel))
		dir, ok := c.resolve(rel)
		if !ok {
			continue
		}
		if !strings.HasPrefix(target, "../../../devices/pci") || !rePCIPath.MatchString(dir) || filepath.Base(dir) != bdf || !reBDF.MatchString(bdf) {
			c.fail("%s: link %s is not ../../../devices/pci<dom>:<bus>/.../<bdf>", rel, target)
		}
		for _, f := range []string{"vendor", "device", "subsystem_vendor", "subsystem_device"} {
			c.match(rel+"/"+f, reHex4)
		}
		if class := c.match(rel+"/class", reHex6); c.read1(rel+"/vendor") == "0x10de" && !strings.HasPrefix(class, "0x03") && !strings.HasPrefix(class, "0x0604") {
			c.fail("%s: NVIDIA function of class %s, want a display controller 0x03xxxx or a Grace root port 0x0604xx", rel, class)
		}
		_, speedErr := os.Stat(filepath.Join(c.root, rel, "max_link_speed"))
		_, widthErr := os.Stat(filepath.Join(c.root, rel, "max_link_width"))
		switch {
		case (speedErr == nil) != (widthErr == nil):
			c.fail("%s: one of max_link_speed and max_link_width without the other", rel)
		case speedErr == nil:
			c.match(rel+"/max_link_speed", reLinkSpeed)
			c.match(rel+"/max_link_width", reLinkWidth)
		}
		if v, _ := c.read(rel + "/numa_node"); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < -1 {
				c.fail("%s/numa_node: %q", rel, v)
			}
		}
		if drv, ok := c.resolve(rel + "/driver"); ok && !strings.HasPrefix(drv, "bus/pci/drivers/") {
			c.fail("%s/driver resolves to %s", rel, drv)
		}
		if _, err := os.Lstat(filepath.Join(c.root, rel, "physfn")); err == nil {
			pf, _ := os.Readlink(filepath.Join(c.root, rel, "physfn"))
			pfDir, _ := c.resolve(rel + "/physfn")
			if !strings.HasPrefix(pf, "../") || strings.Count(pf, "/") != 1 || filepath.Dir(pfDir) != filepath.Dir(dir) {
				c.fail("%s/physfn: %s is not a sibling link", rel, pf)
			}
		}
	}
}

// platform checks, on a tree with a CPU modalias, what the NCCL topology file reads: every
// directory between a root complex and a function is a bridge listed in bus/pci/devices,
// and every NUMA node's cpumap is a bitmap of the same CPUs as the others'.
func (c *checker) platform() {
	if _, err := os.Stat(filepath.Join(c.root, "devices/system/cpu/modalias")); err != nil {
		return
	}
	c.match("devices/system/cpu/modalias", reModalias)
	checked := map[string]bool{} // bridge directories found sound
	for _, bdf := range c.list("bus/pci/devices") {
		dir, _ := c.resolve("bus/pci/devices/" + bdf)
		parts := strings.Split(dir, "/")
		for i := 2; i < len(parts)-1; i++ {
			b, bdir := parts[i], strings.Join(parts[:i+1], "/")
			if checked[bdir] {
				continue
			}
			if up, _ := c.resolve("bus/pci/devices/" + b); up != bdir {
				c.fail("%s: bridge %s on its path is not in bus/pci/devices", dir, b)
			} else if class := c.read1(bdir + "/class"); !strings.HasPrefix(class, "0x0604") {
				c.fail("%s: bridge %s on its path has class %q, want 0x0604xx", dir, b, class)
			} else {
				checked[bdir] = true
			}
		}
	}
	width := -1
	for _, node := range c.list("devices/system/node") {
		m := c.match("devices/system/node/"+node+"/cpumap", reCPUMap)
		if width >= 0 && len(m) != width {
			c.fail("devices/system/node/%s/cpumap: %q is not as long as the other nodes'", node, m)
		}
		width = len(m)
	}
}

// vpd checks a binary vpd file as the PCI specification lays it out: resources that fit,
// keywords of two letters or digits in the read-only section (0x90), whose RV keyword's
// first byte makes all bytes up to it sum to zero, and the end tag 0x78.
func (c *checker) vpd(rel string, b []byte) {
	for off := 0; off < len(b); {
		tag := b[off]
		if tag == 0x78 {
			return
		}
		if tag&0x80 == 0 || off+3 > len(b) {
			c.fail("%s: unexpected tag %#x at %d", rel, tag, off)
			return
		}
		n := int(b[off+1]) | int(b[off+2])<<8
		data := off + 3
		if data+n > len(b) {
			c.fail("%s: resource %#x at %d runs past the end", rel, tag, off)
			return
		}
		for i := data; tag == 0x90 && i < data+n; {
			kw := string(b[i : i+2])
			if !regexp.MustCompile(`^[A-Z0-9]{2}$`).MatchString(kw) || i+3+int(b[i+2]) > data+n {
				c.fail("%s: malformed keyword %q at %d", rel, kw, i)
				return
			}
			if kw == "RV" {
				var sum byte
				for _, x := range b[:i+4] {
					sum += x
				}
				if sum != 0 {
					c.fail("%s: checksum RV is off by %d", rel, sum)
				}
			}
			i += 3 + int(b[i+2])
		}
		off = data + n
	}
	c.fail("%s: no end tag", rel)
}

// modules checks the taint of every loaded module: the kernel's upper-case flags.
func (c *checker) modules() {
	for _, m := range c.list("module") {
		if _, err := os.Stat(filepath.Join(c.root, "module", m, "taint")); err == nil {
			c.match("module/"+m+"/taint", regexp.MustCompile(`^[A-Z]*$`))
		}
	}
}

func (c *checker) ibdevs() {
	for _, ibdev := range c.list("class/infiniband") {
		rel := "class/infiniband/" + ibdev
		target, _ := os.Readlink(filepath.Join(c.root, rel))
		dir, _ := c.resolve(rel)
		if _, err := os.Lstat(filepath.Join(c.root, rel, "device")); err == nil {
			fn, _ := c.resolve(rel + "/device")
			link, _ := os.Readlink(filepath.Join(c.root, rel, "device"))
			if dir != fn+"/infiniband/"+ibdev || link != "../../../"+filepath.Base(fn) || !rePCIPath.MatchString(fn) {
				c.fail("%s: device link %s (to %s) does not match the device directory %s", rel, link, fn, dir)
			}
		} else {
			if target != "../../devices/virtual/infiniband/"+ibdev {
				c.fail("%s: virtual device links to %s", rel, target)
			}
			if parent, _ := c.read(rel + "/parent"); parent == "" {
				c.fail("%s: virtual device without parent", rel)
			}
		}
		c.match(rel+"/node_guid", reGUID)
		c.match(rel+"/sys_image_guid", reGUID)
		c.match(rel+"/node_type", reNodeType)
		c.read(rel + "/fw_ver")
		for _, p := range c.list(rel + "/ports") {
			c.port(rel + "/ports/" + p)
		}
	}
}

func (c *checker) port(rel string) {
	c.match(rel+"/state", reState)
	c.match(rel+"/phys_state", rePhys)
	c.match(rel+"/rate", reRate)
	c.match(rel+"/lid", reLID)
	c.match(rel+"/sm_lid", reLID)
	ll, _ := c.read(rel + "/link_layer")
	if ll != "InfiniBand" && ll != "Ethernet" && ll != "Unknown" {
		c.fail("%s/link_layer: %q", rel, ll)
	}
	for _, i := range c.list(rel + "/gids") {
		gid := c.match(rel+"/gids/"+i, reGID)
		_, typeErr := os.Stat(filepath.Join(c.root, rel, "gid_attrs/types", i))
		_, ndevErr := os.Stat(filepath.Join(c.root, rel, "gid_attrs/ndevs", i))
		if gid == "0000:0000:0000:0000:0000:0000:0000:0000" {
			if typeErr == nil || ndevErr == nil {
				c.fail("%s: unused gid %s has attributes", rel, i)
			}
			continue
		}
		if t, _ := c.read(rel + "/gid_attrs/types/" + i); t != "IB/RoCE v1" && t != "RoCE v2" {
			c.fail("%s: gid %s type %q", rel, i, t)
		}
		switch {
		case ll == "InfiniBand" && ndevErr == nil:
			c.fail("%s: InfiniBand gid %s has a netdev", rel, i)
		case ll == "Ethernet":
			nd, _ := c.read(rel + "/gid_attrs/ndevs/" + i)
			if _, err := os.Lstat(filepath.Join(c.root, "class/net", nd)); err != nil {
				c.fail("%s: gid %s netdev %q is not in class/net", rel, i, nd)
			}
		}
	}
	for _, i := range c.list(rel + "/pkeys") {
		c.match(rel+"/pkeys/"+i, reHex4)
	}
	c.counters(rel)
}

// counters checks a port's counter directories, where the port has them: every file an
// unsigned decimal, the extended data and packet counters present in counters/, and
// lifespan beside the driver's own counters in hw_counters/.
func (c *checker) counters(rel string) {
	if _, err := os.Stat(filepath.Join(c.root, rel, "counters")); err == nil {
		names := c.list(rel + "/counters")
		for _, f := range names {
			c.match(rel+"/counters/"+f, reCounter)
		}
		for _, f := range []string{"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets", "symbol_error", "link_downed"} {
			if !slices.Contains(names, f) {
				c.fail("%s/counters lacks %s", rel, f)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(c.root, rel, "hw_counters")); err == nil {
		names := c.list(rel + "/hw_counters")
		for _, f := range names {
			c.match(rel+"/hw_counters/"+f, reCounter)
		}
		if !slices.Contains(names, "lifespan") || len(names) < 2 {
			c.fail("%s/hw_counters: %v, want the driver's counters and lifespan", rel, names)
		}
	}
}

func (c *checker) chardevs() {
	for _, class := range []string{"infiniband_verbs", "infiniband_mad"} {
		for _, name := range c.list("class/" + class) {
			rel := "class/" + class + "/" + name
			if name == "abi_version" {
				continue
			}
			dir, _ := c.resolve(rel)
			ibdev, _ := c.read(rel + "/ibdev")
			ibdir, ok := c.resolve("class/infiniband/" + ibdev)
			owner := strings.TrimSuffix(ibdir, "/infiniband/"+ibdev)
			if want := owner + "/" + class + "/" + name; ok && dir != want {
				c.fail("%s: resolves to %s, want %s", rel, dir, want)
			}
			c.match(rel+"/dev", reDev)
			if class == "infiniband_mad" {
				port, _ := c.read(rel + "/port")
				if _, err := os.Stat(filepath.Join(c.root, "class/infiniband", ibdev, "ports", port)); err != nil {
					c.fail("%s: port %q of %s does not exist", rel, port, ibdev)
				}
			}
		}
	}
}

func (c *checker) netdevs() {
	for _, nd := range c.list("class/net") {
		rel := "class/net/" + nd
		dir, _ := c.resolve(rel)
		if dir != "devices/virtual/net/"+nd && !(strings.HasPrefix(dir, "devices/pci") && strings.HasSuffix(dir, "/net/"+nd)) {
			c.fail("%s: resolves to %s", rel, dir)
		}
		for _, f := range []string{"address", "mtu", "operstate", "carrier", "type", "dev_port"} {
			c.read(rel + "/" + f)
		}
		if typ, _ := c.read(rel + "/type"); typ != "1" && typ != "32" {
			c.fail("%s/type: %q", rel, typ)
		}
		if _, err := os.Lstat(filepath.Join(c.root, rel, "master")); err == nil {
			m, _ := c.resolve(rel + "/master")
			slaves, _ := c.read(rel + "/master/bonding/slaves")
			if !strings.HasPrefix(m, "devices/virtual/net/") || !slices.Contains(strings.Fields(slaves), nd) {
				c.fail("%s: master %s does not list it as a slave (%q)", rel, m, slaves)
			}
		}
		if slaves, err := os.ReadFile(filepath.Join(c.root, rel, "bonding/slaves")); err == nil {
			for _, s := range strings.Fields(string(slaves)) {
				if m, _ := c.resolve("class/net/" + s + "/master"); m != dir {
					c.fail("%s: slave %s has master %s", rel, s, m)
				}
			}
		}
	}
}

func TestProfilesConform(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := p.Node().Write(dir, WriteOptions{}); err != nil {
				t.Fatalf("Write: %v", err)
			}
			for _, problem := range checkTree(filepath.Join(dir, SysDir)) {
				t.Error(problem)
			}
		})
	}
}

// TestCheckerCatches makes sure the conformance checker is not vacuous: each corruption
// of a good tree must be reported.
func TestCheckerCatches(t *testing.T) {
	// put writes one value, as corruptions of the platform files do.
	put := func(r, rel, value string) error {
		return os.WriteFile(filepath.Join(r, rel), []byte(value+"\n"), 0o644)
	}
	tests := []struct {
		name    string
		corrupt func(root string) error
		want    string
	}{
		{"absolute link", func(r string) error {
			return os.Symlink("/sys/devices/virtual/net/lo", filepath.Join(r, "class/net/lo"))
		}, "absolute link"},
		{"two values", func(r string) error {
			return os.WriteFile(filepath.Join(r, "class/infiniband/mlx5_0/fw_ver"), []byte("1\n2\n"), 0o644)
		}, "one value"},
		{"no newline", func(r string) error {
			return os.WriteFile(filepath.Join(r, "class/net/ibp3s0/mtu"), []byte("4092"), 0o644)
		}, "trailing newline"},
		{"compressed gid", func(r string) error {
			return os.WriteFile(filepath.Join(r, "class/infiniband/mlx5_1/ports/1/gids/3"), []byte("::ffff:10.0.0.1\n"), 0o644)
		}, "does not match"},
		{"attributes of an unused gid", func(r string) error {
			return os.WriteFile(filepath.Join(r, "class/infiniband/mlx5_1/ports/1/gid_attrs/types/9"), []byte("RoCE v2\n"), 0o644)
		}, "unused gid 9"},
		{"counter not a number", func(r string) error {
			return os.WriteFile(filepath.Join(r, "class/infiniband/mlx5_0/ports/1/counters/link_downed"), []byte("N/A (no PMA)\n"), 0o644)
		}, "link_downed"},
		{"counter too long for 64 bits", func(r string) error {
			return os.WriteFile(filepath.Join(r, "class/infiniband/mlx5_1/ports/1/hw_counters/np_cnp_sent"), []byte("123456789012345678901\n"), 0o644)
		}, "np_cnp_sent"},
		{"vpd with a bad checksum", func(r string) error {
			p := filepath.Join(r, "bus/pci/devices/0000:03:00.0/vpd")
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[5]++ // a byte of the identifier string
			return os.WriteFile(p, b, 0o644)
		}, "checksum RV is off"},
		{"vpd without end tag", func(r string) error {
			p := filepath.Join(r, "bus/pci/devices/0000:03:00.0/vpd")
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, b[:len(b)-1], 0o644)
		}, "no end tag"},
		{"lower-case taint", func(r string) error {
			return os.WriteFile(filepath.Join(r, "module/nvidia/taint"), []byte("po\n"), 0o644)
		}, "module/nvidia/taint"},
		{"GPU of a network class", func(r string) error {
			return os.WriteFile(filepath.Join(r, "bus/pci/devices/0000:1b:00.0/class"), []byte("0x020000\n"), 0o644)
		}, "want a display controller"},
		{"link leaving the root", func(r string) error {
			return os.Symlink("../../../../etc", filepath.Join(r, "class/net/escape"))
		}, "leaves the root"},
		{"link speed of an old kernel", func(r string) error {
			return put(r, "bus/pci/devices/0000:03:00.0/max_link_speed", "32 GT/s")
		}, "0000:03:00.0/max_link_speed"},
		{"link width without speed", func(r string) error {
			return os.Remove(filepath.Join(r, "devices/pci0000:00/0000:00:01.0/max_link_speed"))
		}, "one of max_link_speed and max_link_width"},
		{"bridge of a network class", func(r string) error {
			return put(r, "devices/pci0000:00/0000:00:01.0/class", "0x020000")
		}, "bridge 0000:00:01.0 on its path has class"},
		{"bridge not in bus/pci/devices", func(r string) error {
			return os.Remove(filepath.Join(r, "bus/pci/devices/0000:1a:00.0"))
		}, "bridge 0000:1a:00.0 on its path is not in bus/pci/devices"},
		{"cpumap with a short word inside", func(r string) error {
			return put(r, "devices/system/node/node0/cpumap", "ff,ff")
		}, "node0/cpumap"},
		{"lower-case modalias", func(r string) error {
			return put(r, "devices/system/cpu/modalias", "cpu:type:x86,ven0000fam0006mod008f:feature:")
		}, "devices/system/cpu/modalias"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// smallNode's shapes on a platform: every rule has something to check.
			if err := platformNode().Write(dir, WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(dir, SysDir)
			if problems := checkTree(root); len(problems) > 0 {
				t.Fatalf("good tree reported: %v", problems)
			}
			if err := tc.corrupt(root); err != nil {
				t.Fatal(err)
			}
			problems := strings.Join(checkTree(root), "\n")
			if !strings.Contains(problems, tc.want) {
				t.Errorf("problems %q do not mention %q", problems, tc.want)
			}
		})
	}
}
