package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// mockNodeConfig is the mock-node command's configuration.
type mockNodeConfig struct {
	Profile string
	Out     string
	Force   bool
	Mknod   bool
	DevRoot string
	List    bool
}

func mockNodeCommand() *cli.Command {
	cfg := &mockNodeConfig{}
	return &cli.Command{
		Name:  "mock-node",
		Usage: "write the sysfs tree of a fake node with RDMA adapters, for demos and tests",
		Description: "Writes OUT/sys, a tree laid out like a real node's sysfs (pass it as --sysfs-root), and\n" +
			"OUT/chardevs, the /dev/infiniband character devices such a node has, one\n" +
			"\"/dev/infiniband/<name> c <major> <minor>\" line each. With --mknod the devices are also\n" +
			"created (below OUT/dev unless --dev-root says otherwise), which needs root or CAP_MKNOD.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Usage: "the node to write; --list shows them", EnvVars: []string{"MOCK_NODE_PROFILE"}, Destination: &cfg.Profile},
			&cli.StringFlag{Name: "out", Usage: "directory to write the mock node to", EnvVars: []string{"MOCK_NODE_OUT"}, Destination: &cfg.Out, TakesFile: true},
			&cli.BoolFlag{Name: "force", Usage: "replace the mock node in a non-empty --out (other files there are kept)", EnvVars: []string{"MOCK_NODE_FORCE"}, Destination: &cfg.Force},
			&cli.BoolFlag{Name: "mknod", Usage: "also create the character devices (needs root or CAP_MKNOD)", EnvVars: []string{"MOCK_NODE_MKNOD"}, Destination: &cfg.Mknod},
			&cli.StringFlag{Name: "dev-root", Usage: "where --mknod creates infiniband/...; default OUT/dev", EnvVars: []string{"MOCK_NODE_DEV_ROOT"}, Destination: &cfg.DevRoot, TakesFile: true},
			&cli.BoolFlag{Name: "list", Usage: "list the profiles and exit", EnvVars: []string{"MOCK_NODE_LIST"}, Destination: &cfg.List},
		},
		Action: func(c *cli.Context) error {
			if err := cliflags.NoArgs(c, nil); err != nil {
				return err
			}
			if cfg.List {
				return writeProfileList(c.App.Writer)
			}
			return runMockNode(c, cfg)
		},
	}
}

func writeProfileList(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tDESCRIPTION")
	for _, p := range mocknode.Profiles() {
		fmt.Fprintf(tw, "%s\t%s\n", p.Name, p.Description)
	}
	return tw.Flush()
}

func runMockNode(c *cli.Context, cfg *mockNodeConfig) error {
	if cfg.Profile == "" || cfg.Out == "" {
		return cliflags.Usagef("--profile and --out are required (--list shows the profiles)")
	}
	profile, err := mocknode.Lookup(cfg.Profile)
	if err != nil {
		return cliflags.Usagef("%v", err)
	}
	if ents, err := os.ReadDir(cfg.Out); err == nil && len(ents) > 0 && !cfg.Force {
		return fmt.Errorf("%s is not empty: pass --force to replace its mock node (other files there are kept)", cfg.Out)
	}
	node := profile.Node()
	if err := node.Write(cfg.Out, mocknode.WriteOptions{Overwrite: cfg.Force}); err != nil {
		return fmt.Errorf("write mock node: %w", err)
	}
	sysRoot := filepath.Join(cfg.Out, mocknode.SysDir)
	logger := klog.FromContext(c.Context)
	logger.V(2).Info("Wrote mock node", "profile", profile.Name, "sysfsRoot", sysRoot)
	devRoot := ""
	if cfg.Mknod {
		devRoot = cfg.DevRoot
		if devRoot == "" {
			devRoot = filepath.Join(cfg.Out, "dev")
		}
		if err := node.MakeDevNodes(devRoot); err != nil {
			return fmt.Errorf("create device nodes: %w", err)
		}
		logger.V(2).Info("Created character devices", "devRoot", devRoot)
	}
	return writeMockNodeSummary(c.App.Writer, profile, node, cfg.Out, devRoot)
}

// writeMockNodeSummary tells what was written and how to use it.
func writeMockNodeSummary(w io.Writer, profile mocknode.Profile, node *mocknode.Node, out, devRoot string) error {
	ports, ib := 0, 0
	for _, e := range node.ExpectedPorts() {
		ports++
		if e.LinkLayer == discovery.LinkLayerInfiniBand {
			ib++
		}
	}
	sysRoot := filepath.Join(out, mocknode.SysDir)
	chardevs := node.CharDevs()
	fmt.Fprintf(w, "Wrote mock node %q (%s)\n", profile.Name, profile.Description)
	fmt.Fprintf(w, "  %d RDMA devices, %d ports (%d InfiniBand, %d Ethernet), %d netdevs, %d PCI functions\n",
		len(node.RDMADevices), ports, ib, ports-ib, len(node.Netdevs), len(node.PCIFunctions))
	fmt.Fprintf(w, "  sysfs tree:         %s\n", sysRoot)
	fmt.Fprintf(w, "  character devices:  %s (%d lines: path c major minor)\n", filepath.Join(out, mocknode.CharDevsFile), len(chardevs))
	if devRoot != "" {
		fmt.Fprintf(w, "  created below:      %s\n", filepath.Join(devRoot, "infiniband"))
	}
	fmt.Fprintf(w, "\nUse it:\n  rdma-dra discover --sysfs-root %s\n  rdma-dra slices --node NODE --sysfs-root %s\n", sysRoot, sysRoot)
	if devRoot == "" {
		_, err := fmt.Fprintf(w, "  create the devices: rerun with --mknod, or run mknod on each line of %s\n", filepath.Join(out, mocknode.CharDevsFile))
		return err
	}
	_, err := fmt.Fprintf(w, "  kubelet plugin: --sysfs-root %s --dev-root %s\n", sysRoot, devRoot)
	return err
}
