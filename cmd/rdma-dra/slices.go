package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// defaultSysfsRoot is the host's sysfs; only there does netlink describe the same node.
const defaultSysfsRoot = "/sys"

// slicesConfig is what the slices command needs.
type slicesConfig struct {
	nodeName, sysfsRoot, inventoryPath string
	driverName, poolName               string
	legacy                             bool
	configPath, modes                  string
	shares                             int
}

func slicesCommand() *cli.Command {
	cfg := &slicesConfig{}
	flags := []cli.Flag{
		&cli.StringFlag{Name: "node", Usage: "the node the slices are for (required)", EnvVars: []string{"NODE_NAME"}, Destination: &cfg.nodeName},
		&cli.StringFlag{Name: "sysfs-root", Usage: "where sysfs is read from, e.g. a mock node tree", Value: defaultSysfsRoot, EnvVars: []string{"SYSFS_ROOT"}, Destination: &cfg.sysfsRoot, TakesFile: true},
		&cli.StringFlag{Name: "inventory", Usage: "read the inventory from this `FILE` ('-' for stdin) instead of sysfs: what rdma-dra discover -o json writes", EnvVars: []string{"INVENTORY"}, Destination: &cfg.inventoryPath, TakesFile: true},
		&cli.BoolFlag{Name: "legacy", Usage: "the legacy device model, for clusters without partitionable devices and consumable capacity", EnvVars: []string{"LEGACY_MODEL"}, Destination: &cfg.legacy},
		&cli.StringFlag{Name: "driver", Usage: "the DRA driver name", Value: devicemodel.DefaultDriverName, EnvVars: []string{"DRIVER_NAME"}, Destination: &cfg.driverName},
		&cli.StringFlag{Name: "pool", Usage: "the pool name; default <node>" + devicemodel.PoolSuffix, EnvVars: []string{"POOL_NAME"}, Destination: &cfg.poolName},
		&cli.StringFlag{Name: "config", Usage: "node configuration file (YAML or JSON): which ports, which modes, how many shares", EnvVars: []string{"NODE_CONFIG"}, Destination: &cfg.configPath, TakesFile: true},
		&cli.StringFlag{Name: "modes", Usage: "devices per port: both, exclusive or shared (overrides the file)", DefaultText: "the file's, else both", EnvVars: []string{"PORT_MODES"}, Destination: &cfg.modes},
		&cli.IntFlag{Name: "shares", Usage: fmt.Sprintf("shares per port, 1..%d (overrides the file)", nodeconfig.MaxShares), DefaultText: fmt.Sprintf("the file's, else %d", nodeconfig.DefaultShares), EnvVars: []string{"PORT_SHARES"}, Destination: &cfg.shares},
	}
	return &cli.Command{
		Name:  "slices",
		Usage: "print the ResourceSlices this node would publish, as YAML that kubectl apply --dry-run=server checks",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if err := cliflags.NoArgs(c, sysfsRootHint); err != nil {
				return err
			}
			if c.IsSet("inventory") && c.IsSet("sysfs-root") {
				return cliflags.Usagef("--inventory and --sysfs-root exclude each other")
			}
			return runSlices(c, cfg)
		},
	}
}

// runSlices discovers (or reads) the inventory, builds the device model and writes
// the slices as YAML documents.
func runSlices(c *cli.Context, cfg *slicesConfig) error {
	ctx, out := c.Context, c.App.Writer
	if cfg.nodeName == "" {
		return cliflags.Usagef("--node is required")
	}
	nodeCfg, err := nodeconfig.FromFile(cfg.configPath, nodeconfig.Overrides{Modes: nodeconfig.Modes(cfg.modes), Shares: cfg.shares})
	if err != nil {
		return cliflags.Usagef("%v", err)
	}
	inv, err := loadInventory(c, cfg)
	if err != nil {
		return err
	}
	if cfg.configPath != "" {
		warnConfigSelection(c, cfg.configPath, &nodeCfg, naturalPorts(inv.Ports))
	}
	res, err := devicemodel.Build(inv, devicemodel.Options{
		DriverName: cfg.driverName,
		NodeName:   cfg.nodeName,
		PoolName:   cfg.poolName,
		Legacy:     cfg.legacy,
		Config:     nodeCfg,
	})
	if err != nil {
		return err
	}
	// A skipped port is a warning; an omitted attribute is detail for -v 2.
	logger := klog.FromContext(ctx)
	for _, is := range res.Issues {
		if is.Attribute == "" {
			warnf(c, "port %s/%d not published: %s", is.IBDev, is.Port, is.Reason)
			continue
		}
		logger.V(2).Info("Device attribute omitted", "ibdev", is.IBDev, "port", is.Port, "attribute", is.Attribute, "reason", is.Reason)
	}
	for i, slice := range res.ResourceSlices() {
		data, err := yaml.Marshal(slice)
		if err != nil {
			return fmt.Errorf("encode slice %s: %w", slice.Name, err)
		}
		if i > 0 {
			if _, err := io.WriteString(out, "---\n"); err != nil {
				return fmt.Errorf("write slices: %w", err)
			}
		}
		if _, err := out.Write(data); err != nil {
			return fmt.Errorf("write slices: %w", err)
		}
	}
	return nil
}

func loadInventory(c *cli.Context, cfg *slicesConfig) (*discovery.Inventory, error) {
	if cfg.inventoryPath == "" {
		inv, err := discoverAt(c, cfg.sysfsRoot)
		if err != nil {
			return nil, fmt.Errorf("discover ports: %w", err)
		}
		return inv, nil
	}
	data, err := readInput(cfg.inventoryPath, c.App.Reader)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	inv, err := discovery.UnmarshalInventory(data)
	if err != nil {
		return nil, cliflags.Usagef("%s: %v", cfg.inventoryPath, err)
	}
	return inv, nil
}
