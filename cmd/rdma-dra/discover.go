package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
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
	SysfsRoot  string
	Output     string
	GIDs       bool
	ConfigPath string
}

func discoverCommand() *cli.Command {
	cfg := &discoverConfig{}
	return &cli.Command{
		Name:  "discover",
		Usage: "list the RDMA ports of this node (or of a mock node's sysfs tree) as the driver sees them",
		Description: "One row per port: its netdev and its operational state as ibdev2netdev would say, its state,\n" +
			"speed, LID, SM LID and port GUID as ibstat would, and the placement facts (NUMA node, PCIe root,\n" +
			"GID index) the driver publishes. --gids prints the GID tables the way show_gids does, with the\n" +
			"index the driver picks and why. -o json writes the versioned inventory document that\n" +
			"rdma-dra slices --inventory reads (docs/inventory.schema.json). On the live sysfs (/sys) the\n" +
			"RDMA netns mode comes from netlink; below any other root, from the tree.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sysfs-root", Usage: "directory to read sysfs from, e.g. `DIR`/sys of a mock node", Value: sysfs.DefaultRoot, Destination: &cfg.SysfsRoot, EnvVars: []string{"SYSFS_ROOT"}, TakesFile: true},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output format: table, json or yaml", Value: outputTable, Destination: &cfg.Output, EnvVars: []string{"OUTPUT"}},
			&cli.BoolFlag{Name: "gids", Usage: "print the GID table of every port, like show_gids, with the driver's GID index and why", Destination: &cfg.GIDs, EnvVars: []string{"GIDS"}},
			&cli.StringFlag{Name: "config", Usage: "the kubelet plugin's node configuration `FILE`: warn about the ports it leaves out", Destination: &cfg.ConfigPath, EnvVars: []string{"NODE_CONFIG"}, TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			if err := cliflags.NoArgs(c, sysfsRootHint); err != nil {
				return err
			}
			return runDiscover(c, cfg)
		},
	}
}

func runDiscover(c *cli.Context, cfg *discoverConfig) error {
	switch cfg.Output {
	case outputTable, outputJSON, outputYAML:
	default:
		return cliflags.Usagef("unknown output format %q: want table, json or yaml", cfg.Output)
	}
	if cfg.GIDs && cfg.Output != outputTable {
		return cliflags.Usagef("--gids prints a table; it does not combine with -o %s", cfg.Output)
	}
	var nodeCfg *nodeconfig.Config
	if cfg.ConfigPath != "" {
		nc, err := nodeconfig.FromFile(cfg.ConfigPath, nodeconfig.Overrides{})
		if err != nil {
			return err
		}
		nodeCfg = &nc
	}
	inv, err := discoverAt(c, cfg.SysfsRoot)
	if err != nil {
		return err
	}
	ports := naturalPorts(inv.Ports)
	if nodeCfg != nil {
		warnConfigSelection(c, cfg.ConfigPath, nodeCfg, ports)
	}
	w := c.App.Writer
	switch {
	case cfg.Output == outputJSON || cfg.Output == outputYAML:
		sorted := *inv
		sorted.Ports = ports
		b, err := discovery.MarshalInventory(&sorted)
		if err != nil {
			return err
		}
		if cfg.Output == outputYAML {
			if b, err = orderedYAML(b); err != nil {
				return err
			}
		}
		_, err = w.Write(b)
		return err
	case cfg.GIDs:
		return writeGIDTables(w, cfg.SysfsRoot, ports)
	}
	return writeDiscoverTable(w, cfg.SysfsRoot, inv.NetnsMode, ports)
}

// isLiveRoot reports whether root is the host's sysfs, where netlink tells the same.
func isLiveRoot(root string) bool { return filepath.Clean(root) == sysfs.DefaultRoot }

// warnEmptyRoot warns when a root holds no RDMA devices and looks like a mistake: the
// directory a mock node was written to instead of its sys/, or no sysfs tree at all.
func warnEmptyRoot(c *cli.Context, root string, inv *discovery.Inventory) {
	if len(inv.Ports) > 0 {
		return
	}
	if st, err := os.Stat(filepath.Join(root, "sys", "class", "infiniband")); err == nil && st.IsDir() {
		warnf(c, "no RDMA devices below %s, but %s has some: did you mean --sysfs-root %s?", root, filepath.Join(root, "sys"), filepath.Join(root, "sys"))
		return
	}
	if _, err := os.Stat(filepath.Join(root, "class")); err != nil {
		warnf(c, "%s does not look like a sysfs tree (it has no class/ directory)", root)
	}
}

// warnConfigSelection warns about the ports a node configuration leaves out, and when
// it leaves out all of them.
func warnConfigSelection(c *cli.Context, path string, nc *nodeconfig.Config, ports []discovery.Port) {
	var excluded []string
	for i := range ports {
		if !nc.Selects(&ports[i]) {
			excluded = append(excluded, fmt.Sprintf("%s/%d", ports[i].IBDev, ports[i].Port))
		}
	}
	switch {
	case len(ports) > 0 && len(excluded) == len(ports):
		warnf(c, "node config %s selects none of the %d ports: the node would publish an empty slice", path, len(ports))
	case len(excluded) > 0:
		warnf(c, "node config %s leaves out %d of %d ports, which are not published: %s", path, len(excluded), len(ports), strings.Join(excluded, ", "))
	}
}

// writeDiscoverTable writes one row per port, the way ibdev2netdev and ibstat would tell
// a person: which netdev and its state, which port state and speed, where it sits.
func writeDiscoverTable(w io.Writer, root string, netns discovery.NetnsMode, ports []discovery.Port) error {
	mode := string(netns)
	if mode == "" {
		mode = "unknown"
	}
	if _, err := fmt.Fprintf(w, "RDMA netns mode: %s   sysfs: %s   ports: %d\n", mode, root, len(ports)); err != nil {
		return err
	}
	if len(ports) == 0 {
		_, err := fmt.Fprintln(w, "no RDMA devices found")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tNETDEV\tOPER\tLINK\tSTATE\tSPEED\tMTU\tLID\tSM LID\tPORT GUID\tNUMA\tPCIE ROOT\tGID\tMODEL\tFIRMWARE\tFLAGS")
	reasons := map[string]bool{}
	for _, p := range ports {
		state := orDash(p.State)
		if p.PhysState != "" {
			state += " (" + p.PhysState + ")"
		}
		speed := "-"
		if p.SpeedGbps != nil {
			speed = strconv.Itoa(*p.SpeedGbps) + " Gb/s"
		}
		gid := intOrDash(p.GIDIndex)
		if p.GIDIndex == nil {
			gid = gidCell(&p)
			reasons[gid] = true
		}
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			p.IBDev, p.Port, orDash(p.Netdev), orDash(p.NetdevOperState), orDash(p.LinkLayer), state, speed, intOrDash(p.MTU),
			lidOrDash(p.LID), lidOrDash(p.SMLID), orDash(p.PortGUID),
			intOrDash(p.NUMANode), orDash(p.PCIeRoot), gid, orDash(p.Model), orDash(p.FWVer), flags(p))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range []struct{ cell, text string }{
		{"n/a", "GID n/a: InfiniBand ports have no GID index"},
		{"none", "GID none: a RoCE port without a RoCE v2 entry with an IPv4 or global IPv6 address (rdma-dra discover --gids shows its table)"},
		{"?", "GID ?: the link layer is unknown"},
	} {
		if reasons[r.cell] {
			if _, err := fmt.Fprintln(w, r.text); err != nil {
				return err
			}
		}
	}
	return nil
}

// gidCell is the GID column of a port without GID index: why there is none.
func gidCell(p *discovery.Port) string {
	switch p.LinkLayer {
	case discovery.LinkLayerInfiniBand:
		return "n/a"
	case discovery.LinkLayerEthernet:
		return "none"
	}
	return "?"
}

// writeGIDTables prints every port's GID table as show_gids does, marks the entry the
// driver publishes as gid_index and says why.
func writeGIDTables(w io.Writer, root string, ports []discovery.Port) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEV\tPORT\tINDEX\tGID\tADDRESS\tVER\tNETDEV\tDRIVER")
	var summary []string
	for _, p := range ports {
		t, err := discovery.ReadGIDTable(root, p.IBDev, p.Port)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			pick := ""
			if t.Index != nil && *t.Index == e.Index {
				pick = "<- gid_index"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.IBDev, p.Port, e.Index, e.GID.String(), gidAddress(p, e),
				gidVersion(p, e), orDash(e.Netdev), pick)
		}
		line := fmt.Sprintf("%s/%d: ", p.IBDev, p.Port)
		if t.Index != nil {
			line += fmt.Sprintf("gid_index %d: %s", *t.Index, t.Reason)
		} else {
			line += "no gid_index: " + t.Reason
		}
		summary = append(summary, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\n"+strings.Join(summary, "\n"))
	return err
}

// gidAddress is the IP address a RoCE GID stands for: IPv4 for mapped ones.
func gidAddress(p discovery.Port, e discovery.GIDEntry) string {
	if p.LinkLayer != discovery.LinkLayerEthernet {
		return "-"
	}
	a := e.GID.Addr()
	if a.Is4In6() {
		return a.Unmap().String()
	}
	return a.String()
}

func gidVersion(p discovery.Port, e discovery.GIDEntry) string {
	switch {
	case p.LinkLayer == discovery.LinkLayerInfiniBand:
		return "IB"
	case e.Type == sysfs.GIDTypeRoCEv2:
		return "v2"
	case e.Type == sysfs.GIDTypeRoCEv1:
		return "v1"
	}
	return "-"
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

// lidOrDash prints a LID the way ibstat does: decimal.
func lidOrDash(v *int) string { return intOrDash(v) }

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
