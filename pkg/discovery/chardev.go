package discovery

import (
	"errors"
	"io/fs"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// charIndex maps RDMA devices and ports to their character devices. It is built from the
// class devices' own ibdev and port files, never from numbering order, which differs
// between nodes and between boots.
type charIndex struct {
	verbs map[string]CharDev
	umad  map[madKey]CharDev
	issm  map[madKey]CharDev
}

type madKey struct {
	ibdev string
	port  int
}

// charDevs indexes class/infiniband_verbs and class/infiniband_mad. Neither is required:
// a node without ib_uverbs or ib_umad loaded has ports without character devices.
func (s *scan) charDevs() *charIndex {
	idx := &charIndex{verbs: map[string]CharDev{}, umad: map[madKey]CharDev{}, issm: map[madKey]CharDev{}}
	const verbsDir = "class/infiniband_verbs"
	if names, ok := s.classNames(verbsDir); ok {
		for _, nb := range numberedNames(names, "uverbs") {
			dir := verbsDir + "/" + nb.name
			ibdev, dev, ok := s.charDev(dir)
			if !ok {
				continue
			}
			// Lowest number first: should a device ever have two, the choice is stable.
			if _, dup := idx.verbs[ibdev]; !dup {
				idx.verbs[ibdev] = CharDev{Name: nb.name, Major: dev.Major, Minor: dev.Minor}
			}
		}
	}
	const madDir = "class/infiniband_mad"
	if names, ok := s.classNames(madDir); ok {
		for _, kind := range []struct {
			prefix string
			into   map[madKey]CharDev
		}{{"umad", idx.umad}, {"issm", idx.issm}} {
			for _, nb := range numberedNames(names, kind.prefix) {
				dir := madDir + "/" + nb.name
				ibdev, dev, ok := s.charDev(dir)
				if !ok {
					continue
				}
				port, ok := read(s, dir+"/port", sysfs.ParseDecimal)
				if !ok {
					continue
				}
				key := madKey{ibdev: ibdev, port: port}
				if _, dup := kind.into[key]; !dup {
					kind.into[key] = CharDev{Name: nb.name, Major: dev.Major, Minor: dev.Minor}
				}
			}
		}
	}
	return idx
}

// classNames lists a character device class; a class that does not exist is silent.
func (s *scan) classNames(dir string) ([]string, bool) {
	names, err := s.fs.ReadDirNames(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.unknown(dir, err)
		}
		return nil, false
	}
	return names, true
}

// charDev reads the ibdev and dev files of one class device.
func (s *scan) charDev(dir string) (string, sysfs.DevNumber, bool) {
	ibdev, ok := read(s, dir+"/ibdev", sysfs.ParseDeviceName)
	if !ok {
		return "", sysfs.DevNumber{}, false
	}
	dev, ok := read(s, dir+"/dev", sysfs.ParseDevNumber)
	return ibdev, dev, ok
}
