package mocknode

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// CharDevKind says which interface a character device belongs to.
type CharDevKind string

// Character device kinds.
const (
	CharDevVerbs  CharDevKind = "uverbs"
	CharDevUMAD   CharDevKind = "umad"
	CharDevISSM   CharDevKind = "issm"
	CharDevRDMACM CharDevKind = "rdma_cm"
)

// Device numbers as the kernel assigns them. The first 32 uverbs and 64 umad/issm devices
// get fixed minors of major 231; later ones get minors of a dynamically allocated major,
// for which a fixed value is used here so that output stays deterministic. rdma_cm is a
// misc device with a dynamic minor; 58 is a value seen on real hosts.
const (
	ibMajor            = 231
	uverbsBaseMinor    = 192
	uverbsFixedMinors  = 32
	umadFixedMinors    = 64
	issmBaseMinor      = 64
	uverbsDynamicMajor = 510
	umadDynamicMajor   = 509
	// umadDynamicMinors is the size of the dynamic umad range; issm follows it.
	umadDynamicMinors = 8192 - umadFixedMinors
	miscMajor         = 10
	rdmaCMMinor       = 58
	rdmaCMName        = "rdma_cm"
)

// CharDev is one character device of the mock node, to be created below /dev/infiniband.
type CharDev struct {
	// Name is the node name below /dev/infiniband and in sysfs: uverbs0, umad3, rdma_cm.
	Name string `json:"name"`
	// Kind is the interface the device belongs to.
	Kind CharDevKind `json:"kind"`
	// Major and Minor are the device numbers, also written to the class device's dev file.
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	// IBDev is the RDMA device the node belongs to; empty for rdma_cm.
	IBDev string `json:"ibdev,omitempty"`
	// Port is the port of a umad or issm device; 0 otherwise.
	Port int `json:"port,omitempty"`
	// Mode is the permission the node gets, as rdma-core's udev rules set it.
	Mode os.FileMode `json:"mode"`
}

// DevPath is the node's path relative to the device root, e.g. infiniband/uverbs0.
func (c CharDev) DevPath() string { return "infiniband/" + c.Name }

// CharDevs lists the node's character devices: rdma_cm, then uverbsN in device order,
// then umadN and issmN in port order. Devices are numbered as the kernel numbers them in
// registration order, which is the order of n.RDMADevices.
func (n *Node) CharDevs() []CharDev {
	out := []CharDev{{Name: rdmaCMName, Kind: CharDevRDMACM, Major: miscMajor, Minor: rdmaCMMinor, Mode: 0o666}}
	var umad, issm []CharDev
	mad := 0
	for i, d := range n.RDMADevices {
		major, minor := uint32(ibMajor), uint32(uverbsBaseMinor+i)
		if i >= uverbsFixedMinors {
			major, minor = uverbsDynamicMajor, uint32(i-uverbsFixedMinors)
		}
		out = append(out, CharDev{Name: "uverbs" + strconv.Itoa(i), Kind: CharDevVerbs, Major: major, Minor: minor, IBDev: d.Name, Mode: 0o666})
		if d.NoMAD {
			continue
		}
		for _, p := range d.Ports {
			umajor, uminor, iminor := uint32(ibMajor), uint32(mad), uint32(issmBaseMinor+mad)
			if mad >= umadFixedMinors {
				umajor, uminor = umadDynamicMajor, uint32(mad-umadFixedMinors)
				iminor = uint32(umadDynamicMinors + mad - umadFixedMinors)
			}
			suffix := strconv.Itoa(mad)
			umad = append(umad, CharDev{Name: "umad" + suffix, Kind: CharDevUMAD, Major: umajor, Minor: uminor, IBDev: d.Name, Port: p.Number, Mode: 0o600})
			issm = append(issm, CharDev{Name: "issm" + suffix, Kind: CharDevISSM, Major: umajor, Minor: iminor, IBDev: d.Name, Port: p.Number, Mode: 0o600})
			mad++
		}
	}
	return append(append(out, umad...), issm...)
}

// WriteCharDevs writes the chardevs list: one line per character device, in CharDevs
// order, in the form mknod takes its arguments:
//
//	/dev/infiniband/uverbs0 c 231 192
//
// There are no comments or blank lines, so `while read path type major minor` works.
func (n *Node) WriteCharDevs(w io.Writer) error {
	for _, c := range n.CharDevs() {
		if _, err := fmt.Fprintf(w, "/dev/%s c %d %d\n", c.DevPath(), c.Major, c.Minor); err != nil {
			return err
		}
	}
	return nil
}

// MakeDevNodes creates the node's character devices below devRoot (devRoot/infiniband/...)
// with mknod. It needs root or CAP_MKNOD. A node that already exists with the same device
// number is kept, so running it twice is harmless; anything else at that path is an error.
func (n *Node) MakeDevNodes(devRoot string) error {
	dir := filepath.Join(devRoot, "infiniband")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, c := range n.CharDevs() {
		p := filepath.Join(devRoot, filepath.FromSlash(c.DevPath()))
		dev := unix.Mkdev(c.Major, c.Minor)
		err := unix.Mknod(p, unix.S_IFCHR|uint32(c.Mode.Perm()), int(dev))
		switch {
		case errors.Is(err, fs.ErrExist):
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				return fmt.Errorf("inspect existing %s: %w", p, err)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != dev {
				return fmt.Errorf("create %s: something else is already there, want character device %d:%d", p, c.Major, c.Minor)
			}
			continue
		case errors.Is(err, fs.ErrPermission):
			return fmt.Errorf("create character device %s: %w (mknod needs root or CAP_MKNOD)", p, err)
		case err != nil:
			return fmt.Errorf("create character device %s: %w", p, err)
		}
		// mknod honours the umask; set the mode udev would set.
		if err := os.Chmod(p, c.Mode.Perm()); err != nil {
			return fmt.Errorf("set mode of %s: %w", p, err)
		}
	}
	return nil
}
