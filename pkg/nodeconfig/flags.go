package nodeconfig

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// Flags are the command-line flags of the node configuration, each with its
// environment twin: a file, and overrides of its most common fields that a Helm chart
// or a quick experiment can set without writing one.
type Flags struct {
	// Path is the configuration file; empty means no file.
	Path string
	// Modes and Shares override the file's fields when set.
	Modes  string
	Shares int
}

// CLIFlags returns the flags bound to f.
func (f *Flags) CLIFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "config",
			Usage:       "node configuration file (YAML or JSON): which ports, which modes, how many shares",
			Destination: &f.Path,
			EnvVars:     []string{"NODE_CONFIG"},
			TakesFile:   true,
		},
		&cli.StringFlag{
			Name:        "modes",
			Usage:       "devices per port: both, exclusive or shared (overrides the file)",
			Destination: &f.Modes,
			EnvVars:     []string{"PORT_MODES"},
		},
		&cli.IntFlag{
			Name:        "shares",
			Usage:       fmt.Sprintf("shares per port, 1..%d (overrides the file)", MaxShares),
			Destination: &f.Shares,
			EnvVars:     []string{"PORT_SHARES"},
		},
	}
}

// Config reads the file, if any, applies the overrides, then defaults and validates
// the result, so that an override also moves the defaults that follow from it.
func (f *Flags) Config() (Config, error) {
	var c Config
	if f.Path != "" {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return Config{}, fmt.Errorf("read node config: %w", err)
		}
		if c, err = decode(data); err != nil {
			return Config{}, fmt.Errorf("load %s: %w", f.Path, err)
		}
	}
	if f.Modes != "" {
		c.Modes = Modes(f.Modes)
	}
	if f.Shares != 0 {
		c.Shares = f.Shares
	}
	return c.complete()
}
