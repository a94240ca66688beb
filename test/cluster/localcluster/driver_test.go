package localcluster

import (
	"fmt"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// TestDriverValues checks the mock-mode values: network attachment through this
// cluster's NRI socket and netns directory with the emulated RDMA kernel, and a node
// configuration of exactly the given pools and the mock node's rails, which the driver's
// parser accepts.
func TestDriverValues(t *testing.T) {
	l := NewLayout("/repo")
	pools := []nodeconfig.AddressPool{{Name: "p", Selector: nodeconfig.Selector{IfNames: []string{"eth9"}}, Subnet: "10.200.0.0/24",
		RangeStart: "10.200.0.100", RangeEnd: "10.200.0.199", Exclude: []string{"10.200.0.11"}}}
	for _, tc := range []struct {
		name  string
		pools []nodeconfig.AddressPool
	}{{"with pools", pools}, {"without", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := l.driverValues("localhost/rdma-dra-driver", "v1", tc.pools)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Mock              map[string]any            `json:"mock"`
				NetworkAttachment map[string]any            `json:"networkAttachment"`
				NodeConfig        *nodeconfig.Config        `json:"nodeConfig"`
				Pools             map[string]map[string]any `json:"pools"`
			}
			if err := yaml.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("values are not YAML: %v\n%s", err, out)
			}
			want := map[string]any{"enabled": true, "nriSocket": "/run/rdma-dra-local/nri.sock",
				"netnsDir": "/run/rdma-dra-local/containerd/io.containerd.grpc.v1.cri/netns", "rdmaKernel": "emulated"}
			for k, w := range want {
				if v.NetworkAttachment[k] != w {
					t.Errorf("networkAttachment.%s = %v, want %v\n%s", k, v.NetworkAttachment[k], w, out)
				}
			}
			if got := v.Pools["legacy"]["extendedResourceName"]; got != LegacyExtendedResource || v.Pools["legacy"]["enabled"] != true {
				t.Errorf("pools.legacy = %v, want enabled with %s", v.Pools["legacy"], LegacyExtendedResource)
			}
			if v.Mock["sysfsRoot"] != "/var/lib/rdma-dra-local/mock/sys" {
				t.Errorf("mock.sysfsRoot = %v", v.Mock["sysfsRoot"])
			}
			if v.NodeConfig == nil {
				t.Fatalf("no nodeConfig\n%s", out)
			}
			data, _ := yaml.Marshal(v.NodeConfig)
			cfg, err := nodeconfig.Parse(data)
			if err != nil {
				t.Fatalf("the driver refuses the node configuration: %v", err)
			}
			// mlx5_<i> on rail i, and nothing else on a rail.
			for i := range RailCount + 2 {
				p := &discovery.Port{IBDev: fmt.Sprintf("mlx5_%d", i), Port: 1}
				rail, ok, err := cfg.RailOf(p)
				if err != nil || ok != (i < RailCount) || (ok && rail != i) {
					t.Errorf("rail of %s = %d, %v, %v; want %d on a rail: %v", p.IBDev, rail, ok, err, i, i < RailCount)
				}
			}
			if tc.pools == nil {
				if len(v.NodeConfig.Network.AddressPools) != 0 {
					t.Errorf("address pools without pools: %+v", v.NodeConfig.Network)
				}
				return
			}
			if len(v.NodeConfig.Network.AddressPools) != 1 || v.NodeConfig.Network.AddressPools[0].Exclude[0] != "10.200.0.11" {
				t.Fatalf("nodeConfig = %+v\n%s", v.NodeConfig, out)
			}
		})
	}
}
