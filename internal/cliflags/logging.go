// Package cliflags holds the flags every binary of the project shares, each with its
// environment twin, and turns them into configuration.
package cliflags

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // registers the "json" log format
	"k8s.io/klog/v2"
)

// Logging is the logging configuration of a binary.
type Logging struct {
	Verbosity int
	Format    string
}

// Flags returns the logging flags bound to l.
func (l *Logging) Flags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{
			Name:        "v",
			Usage:       "log verbosity: 0 shows what an operator needs, 4 and up is for debugging",
			Destination: &l.Verbosity,
			EnvVars:     []string{"LOG_VERBOSITY"},
		},
		&cli.StringFlag{
			Name:        "log-format",
			Usage:       "log format: text or json",
			Value:       "text",
			Destination: &l.Format,
			EnvVars:     []string{"LOG_FORMAT"},
		},
	}
}

// Apply configures klog from l and returns a context that carries the logger, so that
// everything below uses klog.FromContext.
func (l *Logging) Apply(ctx context.Context) (context.Context, error) {
	if l.Verbosity < 0 {
		return ctx, fmt.Errorf("--v must be 0 or more, got %d", l.Verbosity)
	}
	cfg := logsapi.NewLoggingConfiguration()
	cfg.Verbosity = logsapi.VerbosityLevel(l.Verbosity)
	cfg.Format = l.Format
	if err := logsapi.ValidateAndApply(cfg, nil); err != nil {
		return ctx, fmt.Errorf("apply logging flags: %w", err)
	}
	return klog.NewContext(ctx, klog.Background()), nil
}
