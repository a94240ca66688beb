package nodeconfig

import (
	"fmt"
	"os"
)

// Overrides are fields set on the command line (or their environment twins) over the
// file: what a Helm value or a quick experiment sets without writing a file.
type Overrides struct {
	// Modes, when set, replaces Config.Modes.
	Modes Modes
	// Shares, when not zero, replaces Config.Shares.
	Shares int
}

// FromFile reads the file at path (none when path is empty), applies the overrides,
// then defaults and validates the result. Overrides are applied before defaulting, so
// that they also move the defaults that follow from them (legacy.shares follows shares).
func FromFile(path string, o Overrides) (Config, error) {
	var c Config
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read node config: %w", err)
		}
		if c, err = decode(data); err != nil {
			return Config{}, fmt.Errorf("load %s: %w", path, err)
		}
	}
	if o.Modes != "" {
		c.Modes = o.Modes
	}
	if o.Shares != 0 {
		c.Shares = o.Shares
	}
	return c.complete()
}
