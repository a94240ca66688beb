package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestNetworkPolicy is the table of docs/security.md's claim-side rules: what a claim's
// network section may ask for under its class's config, enforced the same way at
// prepare (Resolve) and in the webhook (ExceedsLimits).
func TestNetworkPolicy(t *testing.T) {
	const macvlanPool = `,"network":{"mode":"macvlan","ipam":"node"},"allowedNetwork":{"addressPools":["rail0"]}`
	open := `,"allowedNetwork":{"modes":["macvlan","move"],"addressPools":["rail0"],"staticAddressPrefixes":["192.168.77.0/24","fd00:77::/64"],` +
		`"routePrefixes":["10.10.0.0/16"],"interfaceNamePrefixes":["net"],"maxMTU":4200,"pkeys":["0x8001"]}`
	tests := []struct {
		name, class, claim string
		wantErr            []string // substrings, each in the error; none: allowed
	}{
		{name: "no network asked on a class without network"},
		{name: "mode none is always allowed", claim: `,"network":{"mode":"none"}`},
		{name: "macvlan on a class without network", claim: `,"network":{"mode":"macvlan"}`,
			wantErr: []string{`network.mode: Forbidden: "macvlan" is not allowed: the DeviceClass configures no network attachment`}},
		{name: "move on a class without network", claim: `,"network":{"mode":"move"}`, wantErr: []string{`network.mode: Forbidden`}},
		{name: "the class's own mode", class: macvlanPool, claim: `,"network":{"mode":"macvlan"}`},
		{name: "a claim narrows the class's mode to none", class: macvlanPool, claim: `,"network":{"mode":"none"}`},
		{name: "another mode than the class's", class: macvlanPool, claim: `,"network":{"mode":"move"}`,
			wantErr: []string{`"move" is not allowed: the DeviceClass's allowedNetwork.modes are ["macvlan"]`}},
		{name: "ipam node without pools", class: `,"network":{"mode":"macvlan"}`, claim: `,"network":{"ipam":"node"}`,
			wantErr: []string{`network.ipam: Forbidden: node is not allowed: the DeviceClass's allowedNetwork.addressPools names no address pool`}},
		{name: "ipam node with a pool", class: macvlanPool, claim: `,"network":{"ipam":"node"}`},
		{name: "static address without prefixes", class: macvlanPool, claim: `,"network":{"addresses":["192.168.77.11/24"]}`,
			wantErr: []string{`network.addresses[0]: Forbidden: static addresses are not allowed`}},
		{name: "static address inside", class: open, claim: `,"network":{"mode":"macvlan","addresses":["192.168.77.11/24"]}`},
		{name: "static IPv6 inside", class: open, claim: `,"network":{"mode":"macvlan","addresses":["fd00:77::11/64"]}`},
		{name: "static address outside", class: open, claim: `,"network":{"addresses":["10.0.0.5/24"]}`,
			wantErr: []string{`network.addresses[0]: Forbidden: 10.0.0.5/24 is not inside one of the DeviceClass's allowedNetwork.staticAddressPrefixes ["192.168.77.0/24", "fd00:77::/64"]`}},
		{name: "static address with a wider prefix", class: open, claim: `,"network":{"addresses":["192.168.77.11/16"]}`,
			wantErr: []string{`has a prefix length of 16, wider than the /24`}},
		{name: "the admin prefix's network address", class: open, claim: `,"network":{"addresses":["192.168.77.0/31"]}`,
			wantErr: []string{`is the network or broadcast address of one`}},
		{name: "the admin prefix's broadcast address", class: open, claim: `,"network":{"addresses":["192.168.77.255/31"]}`,
			wantErr: []string{`is the network or broadcast address of one`}},
		{name: "routes without prefixes", class: macvlanPool, claim: `,"network":{"routes":[{"destination":"10.10.1.0/24"}]}`,
			wantErr: []string{`network.routes[0]: Forbidden: routes are not allowed`}},
		{name: "route inside", class: open, claim: `,"network":{"routes":[{"destination":"10.10.1.0/24","gateway":"192.168.77.1"}]}`},
		{name: "default route", class: open, claim: `,"network":{"routes":[{"destination":"default","gateway":"192.168.77.1"}]}`,
			wantErr: []string{`network.routes[0].destination: Forbidden: default is not inside`}},
		{name: "route gateway outside", class: open, claim: `,"network":{"routes":[{"destination":"10.10.1.0/24","gateway":"172.16.0.1"}]}`,
			wantErr: []string{`network.routes[0].gateway: Forbidden: 172.16.0.1 is not inside`}},
		{name: "interface name not allowed", class: macvlanPool, claim: `,"network":{"interfaceName":"eth1"}`,
			wantErr: []string{`network.interfaceName: Forbidden: is not allowed`}},
		{name: "interface name with the admin prefix", class: open, claim: `,"network":{"interfaceName":"net7"}`},
		{name: "interface name with another prefix", class: open, claim: `,"network":{"interfaceName":"eth0"}`,
			wantErr: []string{`"eth0" does not start with one of the DeviceClass's allowedNetwork.interfaceNamePrefixes ["net"]`}},
		{name: "mtu not allowed", class: macvlanPool, claim: `,"network":{"mtu":1500}`, wantErr: []string{`network.mtu: Forbidden: is not allowed`}},
		{name: "mtu within", class: open, claim: `,"network":{"mtu":4200}`},
		{name: "mtu over", class: open, claim: `,"network":{"mtu":9000}`, wantErr: []string{`network.mtu: Forbidden: 9000 exceeds the DeviceClass's allowedNetwork.maxMTU 4200`}},
		{name: "pkey not allowed", class: macvlanPool, claim: `,"network":{"pkey":"0x8001"}`, wantErr: []string{`network.pkey: Forbidden: is not allowed`}},
		{name: "pkey listed, written otherwise", class: `,"allowedNetwork":{"pkeys":["0x7fff"]}`, claim: `,"network":{"pkey":"0x7FFF"}`},
		{name: "pkey not listed", class: open, claim: `,"network":{"pkey":"0x8002"}`, wantErr: []string{`"0x8002" is not one of the DeviceClass's allowedNetwork.pkeys ["0x8001"]`}},
		{name: "the class's own values are the admin's", class: `,"network":{"mode":"move","interfaceName":"rail0","mtu":9000,"pkey":"0x8003","addresses":["10.1.1.1/24"],"routes":[{"destination":"10.2.0.0/16"}]}`},
		{name: "several fields at once", claim: `,"network":{"mode":"move","addresses":["192.168.77.11/24"],"routes":[{"destination":"default"}]}`,
			wantErr: []string{`network.mode: Forbidden`, `network.addresses[0]: Forbidden`, `network.routes[0]: Forbidden`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var class []*RdmaConfig
			if tt.class != "" {
				class = append(class, cfgOf(t, tt.class))
				if errs := class[0].ValidateFor(nil, SourceClass); len(errs) > 0 {
					t.Fatalf("class config invalid: %v", errs)
				}
			}
			claim := cfgOf(t, tt.claim)
			if errs := claim.ValidateFor(nil, SourceClaim); len(errs) > 0 {
				t.Fatalf("claim config invalid: %v", errs)
			}
			_, err := Resolve(false, class, []*RdmaConfig{claim})
			webhook := ExceedsLimits(nil, claim, class)
			if len(tt.wantErr) == 0 {
				if err != nil || len(webhook) > 0 {
					t.Fatalf("refused: prepare %v, webhook %v", err, webhook)
				}
				return
			}
			if err == nil || len(webhook) == 0 {
				t.Fatalf("allowed: prepare %v, webhook %v; want %q", err, webhook, tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("prepare error %q, want it to contain %q", err, want)
				}
				if !strings.Contains(webhook.ToAggregate().Error(), want) {
					t.Errorf("webhook error %q, want it to contain %q", webhook.ToAggregate(), want)
				}
			}
		})
	}
}

// TestNetworkPolicyClaimOnlyAdminFields: the policy and keepHostAddress are the admin's.
func TestNetworkPolicyClaimOnlyAdminFields(t *testing.T) {
	for _, tt := range []struct{ name, fields, wantField string }{
		{"allowedNetwork", `,"allowedNetwork":{"modes":["move"]}`, "p.allowedNetwork"},
		{"keepHostAddress", `,"network":{"mode":"move","keepHostAddress":true}`, "p.network.keepHostAddress"},
		{"keepHostAddress false too", `,"network":{"keepHostAddress":false}`, "p.network.keepHostAddress"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cfgOf(t, tt.fields)
			if errs := c.ValidateFor(field.NewPath("p"), SourceClass); len(errs) > 0 {
				t.Errorf("class config: %v", errs)
			}
			errs := c.ValidateFor(field.NewPath("p"), SourceClaim)
			if len(errs) != 1 || errs[0].Field != tt.wantField || errs[0].Type != field.ErrorTypeForbidden {
				t.Errorf("claim config: %v, want one Forbidden at %s", errs, tt.wantField)
			}
			if _, err := Resolve(false, nil, []*RdmaConfig{c}); err == nil || !strings.Contains(err.Error(), "only a DeviceClass config may set") {
				t.Errorf("Resolve: %v, want the admin-field error", err)
			}
		})
	}
}

// TestNetworkPolicyValidate: bad policies name the field and the value.
func TestNetworkPolicyValidate(t *testing.T) {
	for _, tt := range []struct{ name, policy, want string }{
		{"mode", `{"modes":["bridge"]}`, `allowedNetwork.modes[0]: Unsupported value: "bridge"`},
		{"pool name", `{"addressPools":[""]}`, `allowedNetwork.addressPools[0]: Invalid value`},
		{"prefix with host bits", `{"staticAddressPrefixes":["192.168.77.1/24"]}`, `has host bits set: did you mean 192.168.77.0/24?`},
		{"default as prefix", `{"routePrefixes":["default"]}`, `write 0.0.0.0/0 or ::/0 for every address on purpose`},
		{"interface prefix too long", `{"interfaceNamePrefixes":["abcdefghijklmno"]}`, `allowedNetwork.interfaceNamePrefixes[0]: Invalid value`},
		{"interface prefix with a slash", `{"interfaceNamePrefixes":["a/b"]}`, `must not contain /`},
		{"mtu", `{"maxMTU":70000}`, `allowedNetwork.maxMTU: Invalid value: 70000: must be from 68 to 65535`},
		{"pkey", `{"pkeys":["0x8000"]}`, `allowedNetwork.pkeys[0]: Invalid value`},
		{"too many", `{"pkeys":[` + strings.Repeat(`"0x8001",`, 32) + `"0x8001"]}`, `allowedNetwork.pkeys: Too many: 33`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cfgOf(t, `,"allowedNetwork":`+tt.policy)
			errs := c.Validate(nil)
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.want) {
				t.Errorf("Validate: %v, want %q", errs, tt.want)
			}
		})
	}
}

// TestPolicyOf: the class's own mode joins the policy's modes; later configs override.
func TestPolicyOf(t *testing.T) {
	p := PolicyOf([]*RdmaConfig{cfgOf(t, `,"allowedNetwork":{"modes":["ipvlan"]}`), nil, cfgOf(t, `,"network":{"mode":"macvlan"}`)})
	for _, m := range []NetworkMode{NetworkModeNone, NetworkModeMacvlan, NetworkModeIPVlan} {
		if !p.AllowsMode(m) {
			t.Errorf("mode %s not allowed by %+v", m, p)
		}
	}
	if p.AllowsMode(NetworkModeMove) {
		t.Errorf("move allowed by %+v", p)
	}
	if p := PolicyOf(nil); p.AllowsMode(NetworkModeMacvlan) || p.AllowsPool("pool0") {
		t.Errorf("empty class allows %+v", p)
	}
}
