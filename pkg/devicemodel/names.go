// Package devicemodel turns the node's inventory into the ResourceSlice devices the driver
// publishes: names, attributes, capacities, counters and taints.
package devicemodel

import (
	"fmt"
	"strings"
)

// DeviceName is the name of the exclusive device of one port: the ibdev with '_' turned
// into '-', plus "-p<port>" (mlx5_0 port 1 is "mlx5-0-p1"). The shared device of the port
// is DeviceName + SharedSuffix.
//
// Kernel device names are lower-case letters, digits and '_', so the result is a DNS
// label for every real device; ValidateDeviceName checks that it is.
func DeviceName(ibdev string, port int) string {
	return fmt.Sprintf("%s-p%d", strings.ReplaceAll(ibdev, "_", "-"), port)
}

// SharedSuffix turns an exclusive device name into the name of the port's shared device.
const SharedSuffix = "-shared"
