// Package nodeconfig is the node configuration of the driver: which RDMA ports a node
// publishes, in which modes, and with how many shares. It is read from a YAML or JSON
// file (the kubelet plugin's and the CLI's --config), decoded strictly, validated with
// field paths and defaulted, so that every consumer sees a complete, valid Config.
package nodeconfig

import (
	"errors"
	"fmt"
	"os"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Version is the only file format version this package reads.
const Version = "v1alpha1"

// Modes says which devices a port is published as in the default device model.
type Modes string

// The values of Config.Modes.
const (
	// ModesBoth publishes an exclusive and a shared device per port; a shared counter
	// set makes sure that only one of them is allocated at a time.
	ModesBoth Modes = "both"
	// ModesExclusive publishes only the exclusive device of each port.
	ModesExclusive Modes = "exclusive"
	// ModesShared publishes only the shared device of each port.
	ModesShared Modes = "shared"
)

// LegacyMode says what the legacy device model publishes per port.
type LegacyMode string

// The values of LegacyConfig.Mode.
const (
	// LegacyModeExclusive publishes one exclusive device per port.
	LegacyModeExclusive LegacyMode = "exclusive"
	// LegacyModeShared publishes LegacyConfig.Shares single-share devices per port.
	LegacyModeShared LegacyMode = "shared"
)

// Defaults and bounds of the share counts.
const (
	// DefaultShares is the shared capacity of a port when the file does not say.
	DefaultShares = 16
	// MaxShares bounds Config.Shares. Shares are a scheduling budget, not a hardware
	// resource; a thousand pods on one port is already far past what RDMA users run.
	MaxShares = 1024
	// MaxLegacyShares bounds LegacyConfig.Shares: in the legacy model every share is
	// a device of its own, and 64 keeps one port's share devices within one slice.
	MaxLegacyShares = 64
)

// maxFileSize bounds what Parse reads; real files are a few hundred bytes.
const maxFileSize = 1 << 20

// Config is the node configuration. The zero value is valid and means Default().
type Config struct {
	// Version is the file format version; empty means Version.
	Version string `json:"version,omitempty"`

	// Include selects the ports to publish: a port is published when it matches any
	// selector. An empty list selects every port.
	Include []Selector `json:"include,omitempty"`
	// Exclude drops the ports that match any of its selectors, after Include.
	Exclude []Selector `json:"exclude,omitempty"`

	// Modes says which devices each port is published as; default ModesBoth.
	Modes Modes `json:"modes,omitempty"`
	// Shares is the shared capacity of each port (rdma.dra.io/shares);
	// default DefaultShares, 1..MaxShares.
	Shares int `json:"shares,omitempty"`

	// Legacy configures the legacy device model, used where the API server does not
	// support shared counters and multi-allocatable devices.
	Legacy LegacyConfig `json:"legacy,omitempty"`

	// Network configures network attachment on this node: the address pools of
	// `ipam: node` (network.go).
	Network NetworkConfig `json:"network,omitempty"`

	// LegacyResources keep the unit of k8s-rdma-shared-dev-plugin resources: each entry
	// is published as one device that stands for every published port its selectors
	// match on the node, shared by up to MaxPods claims (legacy.go).
	LegacyResources []LegacyResource `json:"legacyResources,omitempty"`

	// FabricReadiness makes the pods of some ports wait, before they are bound, until the
	// port is ready for traffic (fabric.go).
	FabricReadiness FabricReadiness `json:"fabricReadiness,omitempty"`

	// Health configures the kubelet plugin's port health checks beyond the port state:
	// when a port is tainted as flapping (health.go).
	Health HealthConfig `json:"health,omitempty"`

	// Rails assign the published ports their rail, the attribute rdma.dra.io/rail
	// (rails.go).
	Rails []Rail `json:"rails,omitempty"`
}

// LegacyConfig configures the legacy device model.
type LegacyConfig struct {
	// Mode is LegacyModeExclusive or LegacyModeShared. It defaults to exclusive when
	// Config.Modes is exclusive and to shared otherwise.
	Mode LegacyMode `json:"mode,omitempty"`
	// Shares is the number of single-share devices per port in shared mode;
	// default min(Config.Shares, MaxLegacyShares), 1..MaxLegacyShares.
	Shares int `json:"shares,omitempty"`
}

// Selector matches ports. Within a selector every non-empty field must match (AND);
// within one field any entry may match (OR). An empty selector matches every port.
type Selector struct {
	// Vendors are PCI vendor IDs, four hex digits with or without 0x: "15b3".
	Vendors []string `json:"vendors,omitempty"`
	// DeviceIDs are PCI device IDs, four hex digits with or without 0x: "1021".
	DeviceIDs []string `json:"deviceIDs,omitempty"`
	// Drivers are kernel driver names of the PCI function: "mlx5_core".
	Drivers []string `json:"drivers,omitempty"`
	// IBDevs are RDMA device names or shell patterns: "mlx5_*".
	IBDevs []string `json:"ibdevs,omitempty"`
	// IfNames are the ports' netdev names or shell patterns: "ibp*", "bond0".
	IfNames []string `json:"ifNames,omitempty"`
	// LinkTypes are link layers, spelled as in an RdmaPool (v1alpha1.LinkTypes):
	// InfiniBand, infiniband, IB, ib; Ethernet, ethernet, ETH, eth, ether.
	LinkTypes []string `json:"linkTypes,omitempty"`
	// PCIAddresses are PCI bus IDs or shell patterns: "0000:03:00.0", "0000:1a:*".
	PCIAddresses []string `json:"pciAddresses,omitempty"`
	// PortGUIDs are port GUIDs (discovery.Port.PortGUID) or shell patterns, in the
	// notation of sysfs and the inventory: "7c8c:0903:00c3:cfee", "7c8c:0903:*". A whole
	// GUID may also be written as ibstat prints it, "0x7c8c090300c3cfee".
	PortGUIDs []string `json:"portGUIDs,omitempty"`
}

// Default returns the configuration of a node without a file: every port, both
// modes, DefaultShares shares, legacy model shared.
func Default() Config {
	var c Config
	c.SetDefaults()
	return c
}

// SetDefaults fills the fields left empty and normalizes the spelling of selector
// entries (hex IDs lower case without 0x, link types as the kernel writes them:
// InfiniBand or Ethernet), so that matching is a plain comparison. It is idempotent.
func (c *Config) SetDefaults() {
	if c.Version == "" {
		c.Version = Version
	}
	if c.Modes == "" {
		c.Modes = ModesBoth
	}
	if c.Shares == 0 {
		c.Shares = DefaultShares
	}
	if c.Legacy.Mode == "" {
		c.Legacy.Mode = LegacyModeShared
		if c.Modes == ModesExclusive {
			c.Legacy.Mode = LegacyModeExclusive
		}
	}
	if c.Legacy.Shares == 0 {
		c.Legacy.Shares = min(max(c.Shares, 1), MaxLegacyShares)
	}
	for i := range c.Include {
		c.Include[i].normalize()
	}
	for i := range c.Exclude {
		c.Exclude[i].normalize()
	}
	c.setLegacyResourceDefaults()
	c.setNetworkDefaults()
	c.setFabricDefaults()
	c.setRailDefaults()
}

// Parse decodes a YAML or JSON configuration strictly (an unknown or duplicated field
// is an error that names it), applies defaults and validates the result.
func Parse(data []byte) (Config, error) {
	c, err := decode(data)
	if err != nil {
		return Config{}, err
	}
	return c.complete()
}

// decode reads a file without defaulting it, so that flags can override fields before
// the defaults that depend on them are computed.
func decode(data []byte) (Config, error) {
	if len(data) > maxFileSize {
		return Config{}, fmt.Errorf("decode node config: %d bytes exceed the limit of %d", len(data), maxFileSize)
	}
	// YAMLToJSONStrict rejects duplicate keys; the JSON decoder then names unknown
	// fields with their full path (legacy.share), and is case-sensitive like the API.
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return Config{}, fmt.Errorf("decode node config: %w", err)
	}
	var c Config
	if string(jsonData) == "null" { // an empty file
		return c, nil
	}
	strictErrs, err := kjson.UnmarshalStrict(jsonData, &c)
	if err != nil {
		return Config{}, fmt.Errorf("decode node config: %w", err)
	}
	if len(strictErrs) > 0 {
		return Config{}, fmt.Errorf("decode node config: %w", errors.Join(strictErrs...))
	}
	return c, nil
}

// complete defaults and validates c.
func (c Config) complete() (Config, error) {
	c.SetDefaults()
	if errs := c.Validate(); len(errs) > 0 {
		return Config{}, fmt.Errorf("validate node config: %w", errs.ToAggregate())
	}
	return c, nil
}

// Load reads and parses the configuration file at path.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read node config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("load %s: %w", path, err)
	}
	return c, nil
}
