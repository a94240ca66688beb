package cliflags

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

// NewApp returns the frame every binary of the project shares: its name, usage and
// version, flags followed by the logging flags, and a Before that sets up logging and
// puts the logger into the context. The caller adds an Action or Commands.
func NewApp(name, usage string, flags []cli.Flag) *cli.App {
	// -v is klog's verbosity, as in every Kubernetes component; --version stays.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version"}
	logging := &Logging{}
	return &cli.App{
		Name:    name,
		Usage:   usage,
		Version: version.String(),
		Flags:   append(flags, logging.Flags()...),
		Before: func(c *cli.Context) error {
			ctx, err := logging.Apply(c.Context)
			if err != nil {
				return err
			}
			c.Context = ctx
			return nil
		},
	}
}

// Main runs app with a context that SIGINT and SIGTERM cancel, and exits non-zero with
// the error, prefixed by the app's name, when it fails.
func Main(app *cli.App) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.RunContext(ctx, os.Args)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", app.Name, err)
		os.Exit(1)
	}
}
