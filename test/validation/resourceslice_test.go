package validation

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// model is one way of building a node's slices and the cluster they are meant for.
type model struct {
	name    string
	cluster cluster
	opts    devicemodel.Options
}

var models = []model{
	{name: "default", cluster: modern},
	{name: "exclusive-only", cluster: modern, opts: devicemodel.Options{Config: nodeconfig.Config{Modes: nodeconfig.ModesExclusive}}},
	{name: "shared-only-max-shares", cluster: modern, opts: devicemodel.Options{Config: nodeconfig.Config{Modes: nodeconfig.ModesShared, Shares: nodeconfig.MaxShares}}},
	{name: "legacy-shared", cluster: older, opts: devicemodel.Options{Legacy: true}},
	// The plugin may fall back to legacy on a cluster that has the features after all.
	{name: "legacy-shared-on-modern", cluster: modern, opts: devicemodel.Options{Legacy: true}},
	{name: "legacy-max-shares", cluster: older, opts: devicemodel.Options{Legacy: true, Config: nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Shares: nodeconfig.MaxLegacyShares}}}},
	{name: "legacy-exclusive", cluster: older, opts: devicemodel.Options{Legacy: true, Config: nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Mode: nodeconfig.LegacyModeExclusive}}}},
	// Legacy resources: devices of several ports whose counters move into the node's
	// legacy counter sets, two of them overlapping, at the largest capacity.
	{name: "legacy-resources", cluster: modern, opts: devicemodel.Options{Config: nodeconfig.Config{LegacyResources: []nodeconfig.LegacyResource{
		{Name: "hca-shared-devices-a", MaxPods: nodeconfig.MaxLegacyPods},
		{Name: "ib", Selectors: nodeconfig.Selector{LinkTypes: []string{"InfiniBand"}}},
	}}}},
	{name: "legacy-resources-exclusive-only", cluster: modern, opts: devicemodel.Options{Config: nodeconfig.Config{Modes: nodeconfig.ModesExclusive,
		LegacyResources: []nodeconfig.LegacyResource{{Name: "all"}}}}},
	// Fabric readiness: every device (and a legacy resource's) with binding conditions,
	// which DRADeviceBindingConditions keeps from 1.36 (beta, on by default).
	{name: "fabric-readiness", cluster: modern, opts: devicemodel.Options{Config: nodeconfig.Config{FabricReadiness: nodeconfig.FabricReadiness{Enabled: true},
		LegacyResources: []nodeconfig.LegacyResource{{Name: "all"}}}}},
	{name: "legacy-fabric-readiness", cluster: older, opts: devicemodel.Options{Legacy: true, Config: nodeconfig.Config{FabricReadiness: nodeconfig.FabricReadiness{Enabled: true}}}},
}

// TestMockNodeProfiles validates the slices of every mock node profile, in every
// model, on the cluster the model is for.
func TestMockNodeProfiles(t *testing.T) {
	profiles := mocknode.Profiles()
	if len(profiles) == 0 {
		t.Fatal("no mock node profiles")
	}
	for _, profile := range profiles {
		inv := discover(t, profile)
		for _, m := range models {
			t.Run(profile.Name+"/"+m.name, func(t *testing.T) {
				slices := build(t, inv, "node-"+profile.Name, m)
				if len(inv.Ports) > 0 && countDevices(slices) == 0 {
					t.Fatalf("%d ports but no devices", len(inv.Ports))
				}
				for _, s := range slices {
					requireAccepted(t, s)
				}
			})
		}
	}
}

// TestEdgeInventories validates inventories that no profile has: many ports (slice
// splitting), strings at and beyond the limits, ports that are not ACTIVE, names that
// need sanitizing.
func TestEdgeInventories(t *testing.T) {
	inventories := map[string]*discovery.Inventory{
		"70 ports, some down": {Ports: manyPorts(70, func(i int, p *discovery.Port) {
			p.State = []string{"ACTIVE", "DOWN", "INIT", "ARMED", "ACTIVE_DEFER", ""}[i%6]
		})},
		"long and odd strings":    {Ports: manyPorts(3, longStrings)},
		"user-named soft-RoCE":    {Ports: []discovery.Port{{IBDev: "RXE.Eth0", Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", Virtual: true}}},
		"no ports":                {},
		"unknown facts, port 255": {Ports: []discovery.Port{{IBDev: "x", Port: 255}}},
		// The ports of one RDMA device share a counter set (hca: n), which exclusive
		// devices consume whole; legacy exclusive publishes one port per device.
		"multi-port RDMA devices":                       {Ports: multiPortDevices()},
		"multi-port RDMA devices, exclusive RDMA netns": {NetnsMode: discovery.NetnsModeExclusive, Ports: multiPortDevices()},
	}
	for name, inv := range inventories {
		for _, m := range models {
			t.Run(name+"/"+m.name, func(t *testing.T) {
				for _, s := range build(t, inv, "edge-node", m) {
					requireAccepted(t, s)
				}
			})
		}
	}
}

// TestValidationCanFail shows that the checks above are able to fail: slices that
// break the limits the model obeys are rejected by the same code, and the default
// model's slices lose fields on a cluster without its features.
func TestValidationCanFail(t *testing.T) {
	modernSlices := func(t *testing.T) []*resourceapi.ResourceSlice {
		return build(t, &discovery.Inventory{Ports: manyPorts(9, nil)}, "n1", model{name: "default", cluster: modern})
	}
	tests := []struct {
		name    string
		cluster cluster
		break_  func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice
		wantErr string // in the validation errors; empty: want dropped fields instead
	}{
		{
			name: "invalid device name", cluster: modern,
			break_: func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
				s[2].Spec.Devices[0].Name = "mlx5_0-p1"
				return s[2]
			},
			wantErr: "spec.devices[0].name",
		},
		{
			name: "nine counter sets in one slice", cluster: modern,
			break_: func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
				s[0].Spec.SharedCounters = append(s[0].Spec.SharedCounters, s[1].Spec.SharedCounters...)
				return s[0]
			},
			wantErr: "spec.sharedCounters",
		},
		{
			name: "devices and counters in one slice", cluster: modern,
			break_: func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
				s[2].Spec.SharedCounters = s[1].Spec.SharedCounters
				return s[2]
			},
			wantErr: "only one of `sharedCounters` or `devices`",
		},
		{
			name: "65 devices that consume counters", cluster: modern,
			break_: func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
				d := s[2].Spec.Devices
				for i := 0; len(s[2].Spec.Devices) < 65; i++ {
					c := *d[i%len(d)].DeepCopy()
					c.Name = fmt.Sprintf("copy-%d", i)
					s[2].Spec.Devices = append(s[2].Spec.Devices, c)
				}
				return s[2]
			},
			wantErr: "spec.devices: Too many: 65",
		},
		{
			name: "string of 65 bytes", cluster: modern,
			break_: func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
				s[2].Spec.Devices[0].Attributes["rdma.dra.io/fw_ver"] = resourceapi.DeviceAttribute{StringValue: ptr.To(strings.Repeat("f", 65))}
				return s[2]
			},
			wantErr: "fw_ver",
		},
		{
			name: "request policy without multi-allocation", cluster: modern,
			break_: func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
				s[2].Spec.Devices[1].AllowMultipleAllocations = nil
				return s[2]
			},
			wantErr: "allowMultipleAllocations must be true",
		},
		{
			name: "default exceeds the shares", cluster: modern,
			break_: func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
				c := s[2].Spec.Devices[1].Capacity[devicemodel.SharesCapacity]
				c.RequestPolicy.Default = ptr.To(apiresource.MustParse("17"))
				s[2].Spec.Devices[1].Capacity[devicemodel.SharesCapacity] = c
				return s[2]
			},
			wantErr: "requestPolicy",
		},
		{
			name: "default model on an older cluster", cluster: older,
			break_: func(s []*resourceapi.ResourceSlice) *resourceapi.ResourceSlice { return s[2] },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			slices := modernSlices(t)
			tc.cluster.apply(t)
			res := createOnServer(t, tc.break_(slices))
			if tc.wantErr == "" {
				if res.dropped == "" {
					t.Error("the server kept every field; the drop check cannot fail")
				}
				return
			}
			found := false
			for _, e := range res.errs {
				found = found || strings.Contains(e.Error(), tc.wantErr)
			}
			if !found {
				t.Errorf("want an error about %q, got %s", tc.wantErr, describe(res.errs))
			}
			// With every declarative rule enforced, the slice must be rejected too.
			if len(res.strictErrs) == 0 {
				t.Errorf("accepted with all declarative rules enforced")
			}
		})
	}
}

// discover writes the profile's tree and runs discovery on it, as the plugin would.
func discover(t *testing.T, profile mocknode.Profile) *discovery.Inventory {
	t.Helper()
	dir := t.TempDir()
	if err := profile.Node().Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatalf("write profile %s: %v", profile.Name, err)
	}
	_, ctx := ktesting.NewTestContext(t)
	inv, err := discovery.New(discovery.Options{SysfsRoot: filepath.Join(dir, mocknode.SysDir)}).Discover(ctx)
	if err != nil {
		t.Fatalf("discover profile %s: %v", profile.Name, err)
	}
	return inv
}

// build makes the slices of inv in model m, with m's cluster's gates on.
func build(t *testing.T, inv *discovery.Inventory, node string, m model) []*resourceapi.ResourceSlice {
	t.Helper()
	m.cluster.apply(t)
	opts := m.opts
	opts.NodeName = node
	res, err := devicemodel.Build(inv, opts)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	res.LogIssues(ktesting.NewLogger(t, ktesting.NewConfig()))
	return res.ResourceSlices()
}

func countDevices(slices []*resourceapi.ResourceSlice) int {
	n := 0
	for _, s := range slices {
		n += len(s.Spec.Devices)
	}
	return n
}

// manyPorts makes n fully known InfiniBand ports, each its own RDMA device and PCI
// function as on mlx5 adapters (TestValidationCanFail relies on their layout of one
// counter set per port; multiPortDevices are the other kind); edit, if set, changes
// port i.
func manyPorts(n int, edit func(i int, p *discovery.Port)) []discovery.Port {
	ports := make([]discovery.Port, 0, n)
	for i := range n {
		p := discovery.Port{
			IBDev: fmt.Sprintf("mlx5_%d", i), Port: 1,
			LinkLayer: discovery.LinkLayerInfiniBand, State: "ACTIVE", PhysState: "LinkUp",
			SpeedGbps: ptr.To(400), Netdev: fmt.Sprintf("ibp%ds0", i), MTU: ptr.To(4096), NUMANode: ptr.To(i % 2),
			NodeGUID: "7c8c:0903:00c3:cfee", FWVer: "28.44.2524", BoardID: "MT_0000000838", HCAType: "MT4129",
			Model: "ConnectX-7", VendorID: "15b3", DeviceID: "1021", Driver: "mlx5_core",
			PCIBusID: fmt.Sprintf("0000:%02x:00.0", i+1), PCIeRoot: "pci0000:00",
		}
		if edit != nil {
			edit(i, &p)
		}
		ports = append(ports, p)
	}
	return ports
}

// multiPortDevices are RDMA devices whose ports share one uverbs node: a dual-port mlx4
// VPI adapter (InfiniBand and a DOWN RoCE port), a four-port iWARP adapter and one of 40
// ports, more than any adapter has, for a counter set of hca: 40; and a single-port mlx5
// device next to them.
func multiPortDevices() []discovery.Port {
	var ports []discovery.Port
	add := func(ibdev string, n int, linkLayer string) {
		for i := range n {
			ports = append(ports, discovery.Port{
				IBDev: ibdev, Port: i + 1, LinkLayer: linkLayer, State: "ACTIVE", PhysState: "LinkUp",
				SpeedGbps: ptr.To(40), NodeGUID: "f452:1403:007b:e1a0", VendorID: "15b3", DeviceID: "1007",
				PCIBusID: "0000:05:00.0", PCIeRoot: "pci0000:00",
			})
		}
	}
	add("mlx4_0", 2, discovery.LinkLayerInfiniBand)
	ports[1].LinkLayer, ports[1].State, ports[1].GIDIndex = discovery.LinkLayerEthernet, "DOWN", ptr.To(3)
	add("cxgb4_0", 4, discovery.LinkLayerEthernet)
	add("big_0", 40, discovery.LinkLayerEthernet)
	add("mlx5_0", 1, discovery.LinkLayerInfiniBand)
	return ports
}

// longStrings puts strings at the limit, beyond it, and not UTF-8 into a port.
func longStrings(i int, p *discovery.Port) {
	p.FWVer = strings.Repeat("9", 64)
	p.BoardID = strings.Repeat("B", 65+i)
	p.HCAType = "MT\xff\xfe"
	p.Model = "ConnectX-7 \u00e9\u00e9" // multi-byte UTF-8 is fine
	p.LinkLayer = discovery.LinkLayerEthernet
	p.GIDIndex = ptr.To(i)
	p.PCIBusID = "0000:03:00.0:extra"
}
