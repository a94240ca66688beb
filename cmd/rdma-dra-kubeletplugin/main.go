// Command rdma-dra-kubeletplugin is the driver's kubelet plugin: it publishes the node's
// RDMA ports as ResourceSlices and prepares ResourceClaims for the kubelet.
package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/plugin"
)

func main() {
	cliflags.Main(newApp())
}

func newApp() *cli.App {
	cfg := &plugin.Config{}
	app := cliflags.NewApp(plugin.Component,
		"publish a node's RDMA ports and prepare ResourceClaims for the kubelet", plugin.Flags(cfg))
	app.Action = func(c *cli.Context) error {
		// The test-only failpoint deliberately has no flag; it is read from the environment
		// only in a binary built with -tags failpoint.
		cfg.PrepareHoldFile = plugin.PrepareHoldFile()
		return plugin.Run(c.Context, *cfg)
	}
	app.Commands = []*cli.Command{{
		Name:  "ready",
		Usage: "exit 0 when the plugin of this container is registered with the kubelet (--ready-file is there): the readiness probe",
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return fmt.Errorf("ready takes no arguments, got %q", c.Args().Slice())
			}
			return plugin.CheckReady(cfg.ReadyFile)
		},
	}}
	return app
}
