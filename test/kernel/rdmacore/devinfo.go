// Package rdmacore reads what rdma-core's and iproute2's tools print, so that the
// real-kernel tests can hold the driver's discovery against them: ibv_devinfo -v (which
// asks the kernel through the verbs ioctls, not sysfs), `rdma -j link` and `rdma -j dev`
// (RDMA netlink, JSON into Link and Dev) and `rdma system` (the netns mode).
package rdmacore

import (
	"bufio"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Device is one hca_id block of ibv_devinfo -v.
type Device struct {
	Name         string
	FWVer        string
	NodeGUID     string
	SysImageGUID string
	VendorID     string
	// BoardID is board_id, which ibv_devinfo prints only when the device has one.
	BoardID     string
	PhysPortCnt int
	Ports       []Port
}

// Port is one port block of ibv_devinfo -v.
type Port struct {
	Number int
	// State and PhysState are the numbers ibv_devinfo prints in parentheses (the
	// kernel's enum values); StateName and PhysStateName its names for them.
	State, PhysState         int
	StateName, PhysStateName string
	LinkLayer                string
	SMLID, LID               int
	// Width is the lane count (1X: 1); LaneGbps the per-lane speed in Gb/s.
	Width    int
	LaneGbps float64
	GIDs     []GID
}

// GID is one GID[ n] line.
type GID struct {
	Index int
	Addr  netip.Addr
	// Type is what ibv_devinfo says of the entry: "RoCE v1", "RoCE v2" or "IB".
	Type string
}

var (
	keyValue = regexp.MustCompile(`^\s*([a-z_]+):\s*(.*)$`)
	numbered = regexp.MustCompile(`^(.*\S)\s+\((\d+)\)$`)
	gidLine  = regexp.MustCompile(`^\s*GID\[\s*(\d+)\]:\s*(\S+?),?\s*(RoCE v1|RoCE v2|IB)?$`)
	width    = regexp.MustCompile(`^(\d+)X$`)
	laneRate = regexp.MustCompile(`^([0-9.]+) Gbps$`)
)

// ParseDevinfo reads ibv_devinfo -v output.
func ParseDevinfo(out string) ([]Device, error) {
	var (
		devs []Device
		dev  *Device
		port *Port
	)
	sc := bufio.NewScanner(strings.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := gidLine.FindStringSubmatch(line); m != nil {
			if port == nil {
				return nil, fmt.Errorf("line %d: GID outside a port: %q", n, line)
			}
			idx, _ := strconv.Atoi(m[1])
			addr, err := netip.ParseAddr(m[2])
			if err != nil {
				return nil, fmt.Errorf("line %d: GID %d: %w", n, idx, err)
			}
			port.GIDs = append(port.GIDs, GID{Index: idx, Addr: addr, Type: m[3]})
			continue
		}
		m := keyValue.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key, val := m[1], strings.TrimSpace(m[2])
		switch key {
		case "hca_id":
			devs = append(devs, Device{Name: val})
			dev, port = &devs[len(devs)-1], nil
			continue
		case "port":
			if dev == nil {
				return nil, fmt.Errorf("line %d: port outside a device", n)
			}
			num, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("line %d: port %q: %w", n, val, err)
			}
			dev.Ports = append(dev.Ports, Port{Number: num})
			port = &dev.Ports[len(dev.Ports)-1]
			continue
		}
		if dev == nil {
			continue
		}
		if port == nil {
			switch key {
			case "fw_ver":
				dev.FWVer = val
			case "node_guid":
				dev.NodeGUID = val
			case "sys_image_guid":
				dev.SysImageGUID = val
			case "vendor_id":
				dev.VendorID = val
			case "board_id":
				dev.BoardID = val
			case "phys_port_cnt":
				dev.PhysPortCnt, _ = strconv.Atoi(val)
			}
			continue
		}
		var err error
		switch key {
		case "state":
			port.StateName, port.State, err = parseNumbered(val)
		case "phys_state":
			port.PhysStateName, port.PhysState, err = parseNumbered(val)
		case "link_layer":
			port.LinkLayer = val
		case "sm_lid":
			port.SMLID, err = strconv.Atoi(val)
		case "port_lid":
			port.LID, err = strconv.Atoi(val)
		case "active_width":
			var name string
			if name, _, err = parseNumbered(val); err == nil {
				if wm := width.FindStringSubmatch(name); wm != nil {
					port.Width, _ = strconv.Atoi(wm[1])
				} else {
					err = fmt.Errorf("width %q", name)
				}
			}
		case "active_speed":
			var name string
			if name, _, err = parseNumbered(val); err == nil {
				if sm := laneRate.FindStringSubmatch(name); sm != nil {
					port.LaneGbps, err = strconv.ParseFloat(sm[1], 64)
				} else {
					err = fmt.Errorf("speed %q", name)
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %s of %s port %d: %w", n, key, dev.Name, port.Number, err)
		}
	}
	return devs, sc.Err()
}

// parseNumbered splits "PORT_ACTIVE (4)" into its name and number.
func parseNumbered(s string) (string, int, error) {
	m := numbered.FindStringSubmatch(s)
	if m == nil {
		return "", 0, fmt.Errorf("%q has no (number)", s)
	}
	v, err := strconv.Atoi(m[2])
	return m[1], v, err
}

// Link is one entry of `rdma -j link show` (the JSON decodes into it as it is).
type Link struct {
	IBDev         string `json:"ifname"`
	Port          int    `json:"port"`
	State         string `json:"state"`
	PhysicalState string `json:"physical_state"`
	Netdev        string `json:"netdev"`
	NetdevIndex   int    `json:"netdev_index"`
}

// Dev is one entry of `rdma -j dev show` (the JSON decodes into it as it is).
type Dev struct {
	IBDev        string `json:"ifname"`
	NodeType     string `json:"node_type"`
	NodeGUID     string `json:"node_guid"`
	SysImageGUID string `json:"sys_image_guid"`
	FW           string `json:"fw"`
}

// ParseNetnsMode reads the mode from `rdma system show` ("netns shared copy-on-fork
// on"), which iproute2 6.1 prints as text even with -j.
func ParseNetnsMode(out string) (string, error) {
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "netns" {
			switch f[i+1] {
			case "shared", "exclusive":
				return f[i+1], nil
			}
			return "", fmt.Errorf("rdma system: unknown netns mode %q", f[i+1])
		}
	}
	return "", fmt.Errorf("rdma system: no netns mode in %q", strings.TrimSpace(out))
}

// StateNames are the kernel's port states (enum ib_port_state) by number, as sysfs and
// the driver spell them.
var StateNames = map[int]string{0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}

// PhysStateNames are the physical port states by number, as sysfs and the driver spell
// them (ibv_devinfo and `rdma link` use other names for the same numbers).
var PhysStateNames = map[int]string{1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp", 6: "LinkErrorRecovery", 7: "Phy Test"}

// RoCEv2GIDIndex applies the driver's documented GID index rule (docs/sysfs.md) to
// a table as ibv_devinfo prints it: the lowest RoCE v2 entry with an IPv4 address that is
// not link-local (169.254/16), else the lowest with a global IPv6 address; -1 for none. It is written here again, from the
// rule's text, so that the driver's implementation is checked, not reused.
func RoCEv2GIDIndex(gids []GID) int {
	for _, g := range gids {
		if g.Type == "RoCE v2" && g.Addr.Is4In6() && !g.Addr.Unmap().IsLinkLocalUnicast() {
			return g.Index
		}
	}
	for _, g := range gids {
		if g.Type == "RoCE v2" && !g.Addr.Is4In6() && g.Addr.IsGlobalUnicast() {
			return g.Index
		}
	}
	return -1
}
