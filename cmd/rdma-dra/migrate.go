package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
)

// migrateConfig is what the migrate command needs.
type migrateConfig struct {
	sharedFile, sriovFile, resourcePrefix string
}

func migrateCommand() *cli.Command {
	cfg := &migrateConfig{}
	return &cli.Command{
		Name:  "migrate",
		Usage: "print RdmaPools that replace a device plugin's resources; differences go to stderr",
		Description: "Reads a k8s-rdma-shared-dev-plugin or sriov-network-device-plugin config.json, a ConfigMap holding it " +
			"under data.\"config.json\", or a NicClusterPolicy ('-' reads stdin), and prints one RdmaPool per resource that " +
			"serves the same extended resource name. Exits non-zero only for input it cannot read.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from-shared-dev-plugin", Usage: "k8s-rdma-shared-dev-plugin configuration file", EnvVars: []string{"FROM_SHARED_DEV_PLUGIN"}, Destination: &cfg.sharedFile, TakesFile: true},
			&cli.StringFlag{Name: "from-sriov-device-plugin", Usage: "sriov-network-device-plugin configuration file; only isRdma resources are converted", EnvVars: []string{"FROM_SRIOV_DEVICE_PLUGIN"}, Destination: &cfg.sriovFile, TakesFile: true},
			&cli.StringFlag{Name: "resource-prefix", Usage: "the SR-IOV plugin's -resource-prefix, for resources without resourcePrefix", Value: migrate.SRIOVDevicePluginPrefix, EnvVars: []string{"RESOURCE_PREFIX"}, Destination: &cfg.resourcePrefix},
		},
		Action: func(c *cli.Context) error {
			return runMigrate(cfg, c.App.Reader, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// runMigrate converts one file and writes pools to out and notes to notes.
func runMigrate(cfg *migrateConfig, stdin io.Reader, out, notes io.Writer) error {
	if (cfg.sharedFile == "") == (cfg.sriovFile == "") {
		return errors.New("give exactly one of --from-shared-dev-plugin and --from-sriov-device-plugin")
	}
	file := cfg.sharedFile + cfg.sriovFile
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	var res *migrate.Result
	if cfg.sharedFile != "" {
		res, err = migrate.FromSharedDevicePlugin(data)
	} else {
		res, err = migrate.FromSRIOVDevicePlugin(data, cfg.resourcePrefix)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	yaml, err := migrate.WriteYAML(res.Pools)
	if err != nil {
		return err
	}
	if _, err := out.Write(yaml); err != nil {
		return err
	}
	for _, n := range res.Notes {
		if _, err := fmt.Fprintln(notes, "note:", n); err != nil {
			return err
		}
	}
	return nil
}
