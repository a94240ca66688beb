package v1alpha1

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestNetworkValidate(t *testing.T) {
	path := field.NewPath("spec", "config").Index(0).Child("opaque", "parameters")
	tests := []struct {
		name string
		doc  string
		want []string // each error's text, in order; none for a valid config
	}{
		{"macvlan with address and route", `{"mode":"macvlan","interfaceName":"roce0","mtu":9000,"addresses":["192.168.77.11/24","fd00:77::11/64"],"routes":[{"destination":"192.168.0.0/16","gateway":"192.168.77.1"},{"destination":"default"}],"socketInterface":true}`, nil},
		{"move keeping host address", `{"mode":"move","keepHostAddress":false}`, nil},
		{"ipoib with pkey", `{"mode":"ipoib","pkey":"0x8001","ipam":"node"}`, nil},
		{"unknown mode", `{"mode":"sriov"}`,
			[]string{`spec.config[0].opaque.parameters.network.mode: Unsupported value: "sriov": supported values: "none", "macvlan", "ipvlan", "move", "ipoib"`}},
		{"interface name too long", `{"interfaceName":"a-very-long-interface"}`,
			[]string{`spec.config[0].opaque.parameters.network.interfaceName: Invalid value: "a-very-long-interface": must be at most 15 characters (the kernel's IFNAMSIZ)`}},
		{"interface name with slash", `{"interfaceName":"../x"}`,
			[]string{`spec.config[0].opaque.parameters.network.interfaceName: Invalid value: "../x": must not contain /, :, % or white space`}},
		{"loopback name", `{"interfaceName":"lo"}`,
			[]string{`spec.config[0].opaque.parameters.network.interfaceName: Invalid value: "lo": must not be lo, the pod's loopback interface`}},
		{"mtu too small", `{"mtu":20}`,
			[]string{`spec.config[0].opaque.parameters.network.mtu: Invalid value: 20: must be from 68 to 65535`}},
		{"address without prefix", `{"addresses":["192.168.77.11"]}`,
			[]string{`spec.config[0].opaque.parameters.network.addresses[0]: Invalid value: "192.168.77.11": must be an address with prefix length, such as 192.168.77.11/24 or fd00::11/64`}},
		{"network address", `{"addresses":["192.168.77.0/24"]}`,
			[]string{`spec.config[0].opaque.parameters.network.addresses[0]: Invalid value: "192.168.77.0/24": is the network or broadcast address of 192.168.77.0/24`}},
		{"link-local address", `{"addresses":["fe80::1/64"]}`,
			[]string{`spec.config[0].opaque.parameters.network.addresses[0]: Invalid value: "fe80::1/64": must be a unicast address (not loopback, link-local, multicast or unspecified)`}},
		{"duplicate address", `{"addresses":["192.168.77.11/24","192.168.77.11/16"]}`,
			[]string{`spec.config[0].opaque.parameters.network.addresses[1]: Duplicate value: "192.168.77.11/16"`}},
		{"too many addresses", `{"addresses":["10.0.0.1/8","10.0.0.2/8","10.0.0.3/8","10.0.0.4/8","10.0.0.5/8","10.0.0.6/8","10.0.0.7/8","10.0.0.8/8","10.0.0.9/8"]}`,
			[]string{`spec.config[0].opaque.parameters.network.addresses: Too many: 9: must have at most 8 items`}},
		{"huge address is not parsed", `{"addresses":["` + strings.Repeat("1", 100000) + `"]}`,
			[]string{`spec.config[0].opaque.parameters.network.addresses[0]: Invalid value: "` + strings.Repeat("1", 64) + `...": must be at most 64 characters`}},
		{"route with host bits", `{"routes":[{"destination":"192.168.1.1/16"}]}`,
			[]string{`spec.config[0].opaque.parameters.network.routes[0].destination: Invalid value: "192.168.1.1/16": has host bits set: did you mean 192.168.0.0/16?`}},
		{"route gateway of other family", `{"routes":[{"destination":"192.168.0.0/16","gateway":"fd00::1"}]}`,
			[]string{`spec.config[0].opaque.parameters.network.routes[0].gateway: Invalid value: "fd00::1": must be of the destination's address family`}},
		{"unknown ipam", `{"ipam":"dhcp"}`,
			[]string{`spec.config[0].opaque.parameters.network.ipam: Unsupported value: "dhcp": supported values: "none", "node"`}},
		{"pkey without 0x", `{"pkey":"8001"}`,
			[]string{`spec.config[0].opaque.parameters.network.pkey: Invalid value: "8001": must be 0x followed by one to four hex digits, such as 0x8001`}},
		{"pkey zero", `{"pkey":"0x8000"}`,
			[]string{`spec.config[0].opaque.parameters.network.pkey: Invalid value: "0x8000": must be a partition key from 0x0001 to 0xffff other than 0x8000`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := DecodeConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":` + tc.doc + `}`))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			var got []string
			for _, e := range cfg.Validate(path) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNetworkDecodeIsStrict(t *testing.T) {
	_, err := DecodeConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"mode":"macvlan","adresses":["192.168.77.11/24"]}}`))
	if err == nil || !strings.Contains(err.Error(), `unknown field "network.adresses"`) {
		t.Fatalf("got %v, want an unknown-field error naming network.adresses", err)
	}
}

func TestNetworkMerge(t *testing.T) {
	class := &RdmaConfig{Network: &NetworkConfig{Mode: ptr.To(NetworkModeMacvlan), IPAM: ptr.To(IPAMNode), MTU: ptr.To[int32](9000),
		Routes: []RouteConfig{{Destination: "192.168.0.0/16"}}}}
	claim := &RdmaConfig{Network: &NetworkConfig{InterfaceName: ptr.To("net1"), Addresses: []string{"192.168.77.11/24"}, Routes: []RouteConfig{}}}
	got := Merge(class, claim)
	want := &NetworkConfig{
		Mode: ptr.To(NetworkModeMacvlan), InterfaceName: ptr.To("net1"), MTU: ptr.To[int32](9000),
		Addresses: []string{"192.168.77.11/24"}, IPAM: ptr.To(IPAMNode),
		// An empty list in the claim replaces the class's list.
		Routes:          []RouteConfig{},
		KeepHostAddress: ptr.To(false), SocketInterface: ptr.To(false),
	}
	if diff := cmp.Diff(want, got.Network); diff != "" {
		t.Errorf("merged network (-want +got):\n%s", diff)
	}
	// The result shares no memory with its inputs.
	got.Network.Addresses[0] = "changed"
	*got.Network.Mode = NetworkModeMove
	if claim.Network.Addresses[0] != "192.168.77.11/24" || *class.Network.Mode != NetworkModeMacvlan {
		t.Error("Merge result shares memory with its inputs")
	}
	// DeepCopy as well.
	cp := class.DeepCopy()
	cp.Network.Routes[0].Destination = "changed"
	if class.Network.Routes[0].Destination != "192.168.0.0/16" {
		t.Error("DeepCopy shares the routes with the original")
	}
}
