package cliflags

import (
	"context"
	"fmt"
	"io"
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
	// --version and a version command print the same line.
	cli.VersionPrinter = PrintVersion
	logging := NewLogging()
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

// PrintVersion prints "<name> <version>", the one form of --version and version.
func PrintVersion(c *cli.Context) {
	fmt.Fprintf(c.App.Writer, "%s %s\n", c.App.Name, c.App.Version)
}

// Main runs app with a context that SIGINT and SIGTERM cancel, and exits with
// ExitCode of the error, printed with the app's name as one line.
func Main(app *cli.App) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, app, os.Args, os.Stderr)
	cancel()
	os.Exit(code)
}

// Run runs app with args and returns the exit status, writing a failure to stderr as
// "<name>: <error>".
func Run(ctx context.Context, app *cli.App, args []string, stderr io.Writer) int {
	err := app.RunContext(ctx, args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", app.Name, err)
	}
	return ExitCode(err)
}
