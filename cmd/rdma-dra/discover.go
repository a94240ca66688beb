package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Output formats of the discover command.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// discoverConfig is the discover command's configuration.
type discoverConfig struct {
	SysfsRoot string
	Output    string
}

func discoverCommand() *cli.Command {
	cfg := &discoverConfig{}
	return &cli.Command{
		Name:  "discover",
		Usage: "list the RDMA ports of this node (or of a mock node's sysfs tree) as the driver sees them",
		Description: "One row per port: its netdev as ibdev2netdev would say, its state and speed as ibstat would,\n" +
			"and the placement facts (NUMA node, PCIe root, GID index) the driver publishes. On the live\n" +
			"sysfs (/sys) the RDMA netns mode comes from netlink; below any other root, from the tree.",
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:        "sysfs-root",
				Usage:       "directory to read sysfs from, e.g. DIR/sys of a mock node",
				Value:       sysfs.DefaultRoot,
				Destination: &cfg.SysfsRoot,
				EnvVars:     []string{"SYSFS_ROOT"},
			},
			&cli.StringFlag{
				Name:        "output",
				Aliases:     []string{"o"},
				Usage:       "output format: table, json or yaml",
				Value:       outputTable,
				Destination: &cfg.Output,
				EnvVars:     []string{"OUTPUT"},
			},
		},
		Action: func(c *cli.Context) error {
			return runDiscover(c, cfg)
		},
	}
}

func runDiscover(c *cli.Context, cfg *discoverConfig) error {
	switch cfg.Output {
	case outputTable, outputJSON, outputYAML:
	default:
		return fmt.Errorf("unknown output format %q: want table, json or yaml", cfg.Output)
	}
	d := discovery.New(discovery.Options{
		SysfsRoot:  cfg.SysfsRoot,
		UseNetlink: filepath.Clean(cfg.SysfsRoot) == sysfs.DefaultRoot,
	})
	inv, err := d.Discover(c.Context)
	if err != nil {
		return err
	}
	w := c.App.Writer
	switch cfg.Output {
	case outputJSON:
		b, err := json.MarshalIndent(newDiscoverOutput(inv), "", "  ")
		if err != nil {
			return fmt.Errorf("encode inventory: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(newDiscoverOutput(inv))
		if err != nil {
			return fmt.Errorf("encode inventory: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return writeDiscoverTable(w, cfg.SysfsRoot, inv)
}

// discoverOutput is the json and yaml form of an inventory. Keys are the attribute names
// of the device model; null means unknown or not applicable.
type discoverOutput struct {
	NetnsMode *string          `json:"netns_mode"`
	Devices   []discoveredPort `json:"devices"`
}

// discoveredPort is one port in the json and yaml output.
type discoveredPort struct {
	Name      string         `json:"name"`
	IBDev     string         `json:"ibdev"`
	Port      int            `json:"port"`
	LinkLayer *string        `json:"link_layer"`
	PortState *string        `json:"port_state"`
	PhysState *string        `json:"phys_state"`
	SpeedGbps *int           `json:"speed_gbps"`
	Rate      *string        `json:"rate"`
	Netdev    *string        `json:"netdev"`
	MTU       *int           `json:"mtu"`
	NUMANode  *int           `json:"numa_node"`
	GIDIndex  *int           `json:"gid_index"`
	PCIBusID  *string        `json:"pci_bus_id"`
	PCIeRoot  *string        `json:"pcie_root"`
	SRIOVVF   bool           `json:"sriov_vf"`
	PhysFn    *string        `json:"physfn"`
	LAG       bool           `json:"lag"`
	Virtual   bool           `json:"virtual"`
	Model     *string        `json:"model"`
	FWVer     *string        `json:"fw_ver"`
	NodeGUID  *string        `json:"node_guid"`
	BoardID   *string        `json:"board_id"`
	HCAType   *string        `json:"hca_type"`
	Driver    *string        `json:"driver"`
	VendorID  *string        `json:"vendor_id"`
	DeviceID  *string        `json:"device_id"`
	Uverbs    *charDevOutput `json:"uverbs"`
	UMAD      *charDevOutput `json:"umad"`
	ISSM      *charDevOutput `json:"issm"`
}

// charDevOutput is a character device: its path on the host and its number.
type charDevOutput struct {
	Path string `json:"path"`
	Dev  string `json:"dev"`
}

func newDiscoverOutput(inv *discovery.Inventory) discoverOutput {
	out := discoverOutput{NetnsMode: str(string(inv.NetnsMode)), Devices: []discoveredPort{}}
	for _, p := range inv.Ports {
		ll := p.LinkLayer
		if ll == discovery.LinkLayerUnknown {
			ll = ""
		}
		out.Devices = append(out.Devices, discoveredPort{
			Name:      devicemodel.DeviceName(p.IBDev, p.Port),
			IBDev:     p.IBDev,
			Port:      p.Port,
			LinkLayer: str(ll),
			PortState: str(p.State),
			PhysState: str(p.PhysState),
			SpeedGbps: p.SpeedGbps,
			Rate:      str(p.Rate),
			Netdev:    str(p.Netdev),
			MTU:       p.MTU,
			NUMANode:  p.NUMANode,
			GIDIndex:  p.GIDIndex,
			PCIBusID:  str(p.PCIBusID),
			PCIeRoot:  str(p.PCIeRoot),
			SRIOVVF:   p.SRIOVVF,
			PhysFn:    str(p.PhysFn),
			LAG:       p.LAG,
			Virtual:   p.Virtual,
			Model:     str(p.Model),
			FWVer:     str(p.FWVer),
			NodeGUID:  str(p.NodeGUID),
			BoardID:   str(p.BoardID),
			HCAType:   str(p.HCAType),
			Driver:    str(p.Driver),
			VendorID:  str(p.VendorID),
			DeviceID:  str(p.DeviceID),
			Uverbs:    charDevOut(p.Verbs),
			UMAD:      charDevOut(p.UMAD),
			ISSM:      charDevOut(p.ISSM),
		})
	}
	return out
}

// str is nil for the empty string, which the inventory uses for "unknown".
func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func charDevOut(c *discovery.CharDev) *charDevOutput {
	if c == nil {
		return nil
	}
	return &charDevOutput{Path: "/dev/infiniband/" + c.Name, Dev: fmt.Sprintf("%d:%d", c.Major, c.Minor)}
}

// writeDiscoverTable writes one row per port, the way ibdev2netdev and ibstat would tell
// a person: which netdev, which state and speed, where it sits, what it is.
func writeDiscoverTable(w io.Writer, root string, inv *discovery.Inventory) error {
	mode := string(inv.NetnsMode)
	if mode == "" {
		mode = "unknown"
	}
	if _, err := fmt.Fprintf(w, "RDMA netns mode: %s   sysfs: %s   ports: %d\n", mode, root, len(inv.Ports)); err != nil {
		return err
	}
	if len(inv.Ports) == 0 {
		_, err := fmt.Fprintln(w, "no RDMA devices found")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tNETDEV\tLINK\tSTATE\tSPEED\tMTU\tNUMA\tPCIE ROOT\tGID\tMODEL\tFIRMWARE\tFLAGS")
	for _, p := range inv.Ports {
		state := orDash(p.State)
		if p.PhysState != "" {
			state += " (" + p.PhysState + ")"
		}
		speed := "-"
		if p.SpeedGbps != nil {
			speed = strconv.Itoa(*p.SpeedGbps) + " Gb/s"
		}
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			p.IBDev, p.Port, orDash(p.Netdev), orDash(p.LinkLayer), state, speed, intOrDash(p.MTU),
			intOrDash(p.NUMANode), orDash(p.PCIeRoot), intOrDash(p.GIDIndex), orDash(p.Model), orDash(p.FWVer), flags(p))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func intOrDash(v *int) string {
	if v == nil {
		return "-"
	}
	return strconv.Itoa(*v)
}

// flags names what sets a port apart: an SR-IOV VF, a LAG or bonded port, a device
// without PCI function.
func flags(p discovery.Port) string {
	var f []string
	if p.SRIOVVF {
		f = append(f, "vf")
	}
	if p.LAG {
		f = append(f, "lag")
	}
	if p.Virtual {
		f = append(f, "virtual")
	}
	return orDash(strings.Join(f, ","))
}
