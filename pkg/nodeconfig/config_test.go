package nodeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    Config
		wantErr []string // substrings that must all be in the error
	}{
		{
			name: "empty file is the default",
			data: "",
			want: Default(),
		},
		{
			name: "default values",
			data: "{}",
			want: Config{Version: Version, Modes: ModesBoth, Shares: 16,
				Legacy: LegacyConfig{Mode: LegacyModeShared, Shares: 16}},
		},
		{
			name: "full YAML, normalized",
			data: `
version: v1alpha1
modes: shared
shares: 100
legacy:
  mode: exclusive
  shares: 4
include:
- vendors: ["0x15B3"]
  deviceIDs: ["1021", "0X101D"]
  linkTypes: [infiniband, ETH]
exclude:
- ibdevs: ["mlx5_bond_*"]
  ifNames: [bond0]
  pciAddresses: ["0000:1a:*"]
  drivers: [mlx5_core]
`,
			want: Config{
				Version: Version, Modes: ModesShared, Shares: 100,
				Legacy: LegacyConfig{Mode: LegacyModeExclusive, Shares: 4},
				Include: []Selector{{
					Vendors:   []string{"15b3"},
					DeviceIDs: []string{"1021", "101d"},
					LinkTypes: []string{"InfiniBand", "Ethernet"},
				}},
				Exclude: []Selector{{
					IBDevs: []string{"mlx5_bond_*"}, IfNames: []string{"bond0"},
					PCIAddresses: []string{"0000:1a:*"}, Drivers: []string{"mlx5_core"},
				}},
			},
		},
		{
			name: "JSON",
			data: `{"modes": "exclusive"}`,
			want: Config{Version: Version, Modes: ModesExclusive, Shares: 16,
				Legacy: LegacyConfig{Mode: LegacyModeExclusive, Shares: 16}},
		},
		{
			name: "legacy shares default is capped",
			data: "shares: 1000",
			want: Config{Version: Version, Modes: ModesBoth, Shares: 1000,
				Legacy: LegacyConfig{Mode: LegacyModeShared, Shares: MaxLegacyShares}},
		},
		{name: "unknown field", data: "mode: both", wantErr: []string{`unknown field "mode"`}},
		{name: "unknown nested field", data: "legacy: {share: 3}", wantErr: []string{`unknown field "legacy.share"`}},
		{name: "duplicate field", data: "shares: 1\nshares: 2", wantErr: []string{`"shares" already set`}},
		{name: "wrong type", data: "shares: many", wantErr: []string{"decode node config"}},
		{name: "field names are case-sensitive", data: "Shares: 4", wantErr: []string{`unknown field "Shares"`}},
		{name: "bad version", data: "version: v2", wantErr: []string{"version", `"v2"`}},
		{name: "bad modes", data: "modes: all", wantErr: []string{"modes", `"all"`}},
		{name: "shares too many", data: "shares: 5000", wantErr: []string{"shares: Invalid value: 5000"}},
		{name: "shares negative", data: "shares: -1", wantErr: []string{"shares: Invalid value: -1"}},
		{name: "legacy shares too many", data: "legacy: {shares: 65}", wantErr: []string{"legacy.shares"}},
		{name: "legacy mode", data: "legacy: {mode: both}", wantErr: []string{"legacy.mode"}},
		{
			name:    "selector errors carry their paths",
			data:    `include: [{vendors: ["15b3", "xyz"]}, {linkTypes: [iWARP]}]` + "\nexclude: [{ibdevs: ['mlx5_['], drivers: ['']}]",
			wantErr: []string{"include[0].vendors[1]", "include[1].linkTypes[0]", "exclude[0].ibdevs[0]", "exclude[0].drivers[0]"},
		},
		{name: "too large", data: strings.Repeat(" ", maxFileSize+1), wantErr: []string{"exceed the limit"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.data))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse succeeded with %+v, want an error", got)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("shares: 8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("shares: 0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("good", func(t *testing.T) {
		c, err := Load(good)
		if err != nil || c.Shares != 8 {
			t.Fatalf("Load = %+v, %v; want shares 8", c, err)
		}
	})
	t.Run("bad names the file", func(t *testing.T) {
		if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Fatalf("Load error %v does not name %s", err, bad)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := Load(filepath.Join(dir, "nope")); err == nil {
			t.Fatal("Load of a missing file succeeded")
		}
	})
}

func TestSelects(t *testing.T) {
	ib := discovery.Port{IBDev: "mlx5_0", Port: 1, LinkLayer: discovery.LinkLayerInfiniBand,
		VendorID: "15b3", DeviceID: "1021", Driver: "mlx5_core", Netdev: "ibp3s0", PCIBusID: "0000:03:00.0"}
	roce := discovery.Port{IBDev: "mlx5_bond_0", Port: 1, LinkLayer: discovery.LinkLayerEthernet,
		VendorID: "15b3", DeviceID: "101d", Driver: "mlx5_core", Netdev: "bond0", PCIBusID: "0000:1a:00.0"}
	rxe := discovery.Port{IBDev: "rxe0", Port: 1, LinkLayer: discovery.LinkLayerEthernet, Netdev: "eth0", Virtual: true}
	all := []discovery.Port{ib, roce, rxe}

	tests := []struct {
		name string
		yaml string
		want []string // ibdevs selected, in order
	}{
		{name: "default selects all", yaml: "", want: []string{"mlx5_0", "mlx5_bond_0", "rxe0"}},
		{name: "vendor", yaml: "include: [{vendors: ['0x15B3']}]", want: []string{"mlx5_0", "mlx5_bond_0"}},
		{name: "device ID", yaml: "include: [{deviceIDs: ['101D']}]", want: []string{"mlx5_bond_0"}},
		{name: "driver", yaml: "include: [{drivers: [rdma_rxe]}]", want: nil},
		{name: "ibdev pattern", yaml: "include: [{ibdevs: ['mlx5_*']}]", want: []string{"mlx5_0", "mlx5_bond_0"}},
		{name: "ifName", yaml: "include: [{ifNames: [eth0, 'ib*']}]", want: []string{"mlx5_0", "rxe0"}},
		{name: "link type", yaml: "include: [{linkTypes: [ethernet]}]", want: []string{"mlx5_bond_0", "rxe0"}},
		{name: "PCI address pattern skips virtual", yaml: "include: [{pciAddresses: ['0000:*']}]", want: []string{"mlx5_0", "mlx5_bond_0"}},
		{name: "fields AND", yaml: "include: [{vendors: [15b3], linkTypes: [Ethernet]}]", want: []string{"mlx5_bond_0"}},
		{name: "selectors OR", yaml: "include: [{ibdevs: [rxe0]}, {deviceIDs: ['1021']}]", want: []string{"mlx5_0", "rxe0"}},
		{name: "include then exclude", yaml: "include: [{vendors: [15b3]}]\nexclude: [{ifNames: [bond*]}]", want: []string{"mlx5_0"}},
		{name: "exclude only", yaml: "exclude: [{linkTypes: [InfiniBand]}]", want: []string{"mlx5_bond_0", "rxe0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for i := range all {
				if c.Selects(&all[i]) {
					got = append(got, all[i].IBDev)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("selected (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaultsIdempotent(t *testing.T) {
	c, err := Parse([]byte("modes: exclusive\ninclude: [{vendors: ['0x15B3'], linkTypes: [ib]}]"))
	if err != nil {
		t.Fatal(err)
	}
	again := c
	again.Include = []Selector{{Vendors: append([]string(nil), c.Include[0].Vendors...),
		LinkTypes: append([]string(nil), c.Include[0].LinkTypes...)}}
	again.SetDefaults()
	if diff := cmp.Diff(c, again); diff != "" {
		t.Errorf("second SetDefaults changed the config (-first +second):\n%s", diff)
	}
	if errs := again.Validate(); len(errs) > 0 {
		t.Errorf("defaulted config invalid: %v", errs)
	}
}

// TestLinkTypes checks that a node configuration takes exactly the link type spellings
// of an RdmaPool, and spells them as the kernel does.
func TestLinkTypes(t *testing.T) {
	for _, lt := range v1alpha1.LinkTypes {
		t.Run(string(lt), func(t *testing.T) {
			want, ok := lt.LinkLayer()
			if !ok {
				t.Fatalf("v1alpha1.LinkTypes entry %q has no link layer", lt)
			}
			c, err := Parse([]byte("exclude: [{linkTypes: [" + string(lt) + "]}]"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.Exclude[0].LinkTypes; len(got) != 1 || got[0] != want {
				t.Errorf("linkTypes %q normalized to %v, want [%s]", lt, got, want)
			}
		})
	}
	// Spellings an RdmaPool refuses (the CRD's enum) are refused here too, with the
	// path of the entry and the accepted spellings.
	for _, bad := range []string{"ETHERNET", "INFINIBAND", "Infiniband", "Ib", "Eth", "ETHER", "RoCE", "iWARP", `""`} {
		t.Run("refused "+bad, func(t *testing.T) {
			_, err := Parse([]byte("include: [{vendors: [15b3]}, {linkTypes: [Ethernet, " + bad + "]}]"))
			if err == nil {
				t.Fatalf("link type %s accepted", bad)
			}
			for _, want := range []string{"include[1].linkTypes[1]: Unsupported value", `"InfiniBand"`, `"ether"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "{}", "shares: 8", "modes: shared\nlegacy: {mode: exclusive, shares: 2}",
		"include: [{vendors: ['0x15b3'], ibdevs: ['mlx5_*']}]\nexclude: [{linkTypes: [Ethernet]}]",
		`{"include":[{"pciAddresses":["0000:[0-9]*"]}]}`, "shares: [1]", "a: &a [*a]",
		"rails: [{rail: 0, selectors: [{portGUIDs: ['0x7c8c090300c3cfee']}]}, {rail: 1, selectors: [{ifNames: ['ib*']}]}]",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever Parse accepts is complete and valid, and defaulting it again
		// changes nothing.
		if errs := c.Validate(); len(errs) > 0 {
			t.Fatalf("Parse returned an invalid config: %v", errs)
		}
		again := c
		again.SetDefaults()
		if diff := cmp.Diff(c, again); diff != "" {
			t.Fatalf("SetDefaults not idempotent:\n%s", diff)
		}
		p := discovery.Port{IBDev: "mlx5_0", Port: 1, VendorID: "15b3", LinkLayer: discovery.LinkLayerInfiniBand}
		_ = c.Selects(&p)
		if _, ok, err := c.RailOf(&p); ok && err != nil {
			t.Fatalf("RailOf reports a rail and a conflict: %v", err)
		}
	})
}

func TestFromFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(file, []byte("modes: exclusive\nshares: 8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		o       Overrides
		want    Config
		wantErr string
	}{
		{name: "nothing", want: Default()},
		{name: "file", path: file, want: Config{Version: Version, Modes: ModesExclusive, Shares: 8,
			Legacy: LegacyConfig{Mode: LegacyModeExclusive, Shares: 8}}},
		{name: "overrides move dependent defaults", path: file, o: Overrides{Modes: ModesShared, Shares: 100},
			want: Config{Version: Version, Modes: ModesShared, Shares: 100, Legacy: LegacyConfig{Mode: LegacyModeShared, Shares: 64}}},
		{name: "bad override", o: Overrides{Modes: "some"}, wantErr: "modes"},
		{name: "missing file", path: filepath.Join(dir, "none"), wantErr: "read node config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromFile(tc.path, tc.o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}
