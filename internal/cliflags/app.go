package cliflags

import (
	"context"
	"errors"
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
// puts the logger into the context. The caller adds an Action or Commands. Run adds
// --version; Flags holds the flags that configure the binary, each with an environment
// twin, and nothing else.
func NewApp(name, usage string, flags []cli.Flag) *cli.App {
	logging := NewLogging()
	return &cli.App{
		Name:    name,
		Usage:   usage,
		Version: version.String(),
		// urfave/cli's own --version has the alias -v, which is klog's verbosity here,
		// as in every Kubernetes component; Run adds a --version without it.
		HideVersion: true,
		Flags:       append(flags, logging.Flags()...),
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

// Main runs app with a context that SIGINT and SIGTERM cancel, and exits with
// ExitCode of the error, printed with the app's name as one line.
func Main(app *cli.App) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, app, os.Args, os.Stderr)
	cancel()
	os.Exit(code)
}

// Run runs app with args and returns the exit status, writing a failure to stderr as
// "<name>: <error>". It gives app a --version flag first (withVersionFlag).
func Run(ctx context.Context, app *cli.App, args []string, stderr io.Writer) int {
	withVersionFlag(app)
	err := app.RunContext(ctx, args)
	if errors.Is(err, errVersionPrinted) {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", app.Name, err)
	}
	return ExitCode(err)
}
