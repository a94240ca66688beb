// Package devicemodel turns the node's inventory into the ResourceSlice devices the driver
// publishes: names, attributes, capacities, counters and taints.
package devicemodel

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DeviceName is the name of the exclusive device of one port: the ibdev with '_' turned
// into '-', plus "-p<port>" (mlx5_0 port 1 is "mlx5-0-p1"). The shared device of the port
// is DeviceName + SharedSuffix.
//
// Kernel device names are lower-case letters, digits and '_', so the result is a DNS
// label for every real device. Names a user gave (soft-RoCE links can be called
// anything) are lower-cased and every other character outside [a-z0-9-] becomes '-';
// whether the result is usable is for ValidateDeviceName to say, and Build checks that
// no two ports end up with the same name.
func DeviceName(ibdev string, port int) string {
	return fmt.Sprintf("%s-p%d", RDMADeviceName(ibdev), port)
}

// RDMADeviceName is the ibdev as device names spell it, without a port: lower case,
// every character outside [a-z0-9-] turned into '-' ("mlx4_0" is "mlx4-0"). It names the
// counter set that the ports of an RDMA device with several published ports share.
func RDMADeviceName(ibdev string) string {
	var b strings.Builder
	b.Grow(len(ibdev))
	for _, r := range strings.ToLower(ibdev) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// SharedSuffix turns an exclusive device name into the name of the port's shared device.
const SharedSuffix = "-shared"

// SharedDeviceName is the name of the shared device of the port whose exclusive device
// is called name.
func SharedDeviceName(name string) string {
	return name + SharedSuffix
}

// LegacyShareName is the name of the k-th single-share device of a port in the legacy
// model: "<name>-s<k>", k counted from 0 like the kernel's device indices.
func LegacyShareName(name string, k int) string {
	return fmt.Sprintf("%s-s%d", name, k)
}

// ValidateDeviceName returns why name cannot be a device or counter set name (both
// must be DNS labels), or nil.
func ValidateDeviceName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("device name %q is not a DNS label: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}
