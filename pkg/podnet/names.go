package podnet

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// Default names of pod interfaces, for devices without network.interfaceName.
//
// Each installation of the driver picks the lowest free default name among those its
// own checkpoint records for the pod. Two installations on one node (two driver names,
// see cdi.Vendor) that attach into the same pod would therefore both pick rdma0, and
// the second attachment would fail on the name the first took, every time the pod's
// sandbox is retried. So every installation has a prefix of its own, derived from the
// driver name alone, the same on every node, for every pod and in every version
// (docs/network-attachment.md):
//
//   - the standard installation (driver rdma.dra.io, the default): rdma0, rdma1, ...;
//   - any other driver name: up to five letters and digits of its first DNS label, six
//     hex digits of the 32-bit FNV-1a hash of the whole name, a hyphen and the index,
//     e.g. rdmab3a40db-0 for rdma-b.example.com. The hash tells apart installations
//     whose names share the first label; the hyphen keeps the index apart from the hash.
//     The label is cut shorter where the index needs it, so that the name stays within
//     Linux's 15 bytes.

// maxIfNameLen is the longest Linux interface name (IFNAMSIZ less the terminating NUL).
const maxIfNameLen = 15

// ifNameHashLen is how many hex digits of the driver name's hash a default name has.
const ifNameHashLen = 6

// defaultPodIfName is the name of the k-th pod interface of the installation whose
// driver name is driverName.
func defaultPodIfName(driverName string, k int) string {
	idx := strconv.Itoa(k)
	if driverName == "" || driverName == devicemodel.DefaultDriverName {
		return "rdma" + idx
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(driverName))
	hash := fmt.Sprintf("%08x", h.Sum32())[:ifNameHashLen]
	label, _, _ := strings.Cut(driverName, ".")
	var b strings.Builder
	room := min(5, maxIfNameLen-ifNameHashLen-1-len(idx))
	for _, r := range label {
		if b.Len() >= room {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String() + hash + "-" + idx
}
