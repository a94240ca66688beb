// Command rdma-dra is the operator's CLI: what a node has, what it would publish, mock
// nodes for demos and tests.
package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

func main() {
	cliflags.Main(newApp())
}

func newApp() *cli.App {
	app := cliflags.NewApp("rdma-dra", "inspect the RDMA ports of a node the way the rdma.dra.io driver sees them", nil)
	app.Commands = []*cli.Command{
		discoverCommand(),
		slicesCommand(),
		mockNodeCommand(),
		migrateCommand(),
		versionCommand(),
	}
	return app
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version of this build",
		Action: func(c *cli.Context) error {
			_, err := fmt.Fprintln(c.App.Writer, "rdma-dra", version.String())
			return err
		},
	}
}
