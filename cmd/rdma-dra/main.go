// Command rdma-dra is the operator's CLI: what a node has, what it would publish, mock
// nodes for demos and tests.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := newApp().RunContext(ctx, os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "rdma-dra: %v\n", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	// -v is klog's verbosity, as in every Kubernetes component; --version stays.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version"}
	logging := &cliflags.Logging{}
	return &cli.App{
		Name:    "rdma-dra",
		Usage:   "inspect the RDMA ports of a node the way the rdma.dra.io driver sees them",
		Version: version.String(),
		Flags:   logging.Flags(),
		Before: func(c *cli.Context) error {
			ctx, err := logging.Apply(c.Context)
			if err != nil {
				return err
			}
			c.Context = ctx
			return nil
		},
		Commands: []*cli.Command{
			discoverCommand(),
			slicesCommand(),
			mockNodeCommand(),
			migrateCommand(),
			versionCommand(),
		},
	}
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
