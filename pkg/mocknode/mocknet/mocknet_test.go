package mocknet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// planProfile writes a mock-node profile into a temporary directory and plans it.
func planProfile(t *testing.T, profile string) *Plan {
	t.Helper()
	dir := t.TempDir()
	if err := mocknode.WriteProfile(profile, dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	plan, err := PlanTree(context.Background(), filepath.Join(dir, "sys"))
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

type linkSummary struct {
	Name, MAC string
	Role      Role
	MTU       int
	Addresses []string
	Ports     []string
	Master    string
}

func summarize(p *Plan) []linkSummary {
	var out []linkSummary
	for _, l := range p.Links {
		s := linkSummary{Name: l.Name, MAC: l.HardwareAddr, Role: l.Role, MTU: l.MTU, Ports: l.Ports, Master: l.Master}
		for _, a := range l.Addresses {
			s.Addresses = append(s.Addresses, a.String())
		}
		out = append(out, s)
	}
	return out
}

func TestPlanTree(t *testing.T) {
	for _, tc := range []struct {
		profile string
		want    []linkSummary
	}{
		{"dgx-h100", []linkSummary{
			{Name: "enp168s0f0np0", MAC: "a0:88:c2:a8:1e:40", Role: RoleRoCE, MTU: 9000, Addresses: []string{"10.200.0.11/24"}, Ports: []string{"mlx5_8/1"}},
			{Name: "enp168s0f1np1", MAC: "a0:88:c2:a8:1e:41", Role: RoleRoCE, MTU: 9000, Addresses: []string{"10.200.1.11/24"}, Ports: []string{"mlx5_9/1"}},
			{Name: "ibp154s0", MAC: "02:03:00:56:d2:e0", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_4/1"}},
			{Name: "ibp192s0", MAC: "02:03:00:56:d2:f0", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_5/1"}},
			{Name: "ibp206s0", MAC: "02:03:00:56:d3:00", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_6/1"}},
			{Name: "ibp220s0", MAC: "02:03:00:56:d3:10", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_7/1"}},
			{Name: "ibp24s0", MAC: "02:03:00:56:d2:a0", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_0/1"}},
			{Name: "ibp64s0", MAC: "02:03:00:56:d2:b0", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_1/1"}},
			{Name: "ibp79s0", MAC: "02:03:00:56:d2:c0", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_2/1"}},
			{Name: "ibp94s0", MAC: "02:03:00:56:d2:d0", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_3/1"}},
		}},
		{"mixed-bond", []linkSummary{
			{Name: "bond0", MAC: "94:6d:ae:5e:0a:00", Role: RoleBond, MTU: 9000, Addresses: []string{"10.10.0.7/24"}, Ports: []string{"mlx5_4/1", "mlx5_5/1"}},
		}},
		// An 802.3ad bond as the kernel shows it: the slaves have the bond's MAC.
		{"gb200", []linkSummary{
			{Name: "bond0", MAC: "58:a2:e1:06:03:00", Role: RoleBond, MTU: 9000, Addresses: []string{"10.60.0.21/24"}, Ports: []string{"mlx5_bond_0/1"}},
			{Name: "enP6p3s0f0np0", MAC: "58:a2:e1:06:03:00", Role: RoleBondSlave, MTU: 9000, Master: "bond0"},
			{Name: "enP6p3s0f1np1", MAC: "58:a2:e1:06:03:00", Role: RoleBondSlave, MTU: 9000, Master: "bond0"},
			{Name: "ibP16p3s0", MAC: "02:03:00:b1:10:00", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_2/1"}},
			{Name: "ibP18p3s0", MAC: "02:03:00:b1:12:00", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_3/1"}},
			{Name: "ibP2p3s0", MAC: "02:03:00:b1:02:00", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_1/1"}},
			{Name: "ibp3s0", MAC: "02:03:00:b1:00:00", Role: RoleIPoIB, MTU: 4092, Ports: []string{"mlx5_0/1"}},
		}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			got := summarize(planProfile(t, tc.profile))
			if tc.profile == "mixed-bond" {
				// Only the bond and its slaves matter here.
				got = slices.DeleteFunc(got, func(s linkSummary) bool { return s.Role == RoleIPoIB })
				if len(got) != 3 || got[1].Master != "bond0" || got[2].Master != "bond0" || got[1].Role != RoleBondSlave {
					t.Fatalf("bond plan: %+v, want bond0 then its two slaves", got)
				}
				got = got[:1]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidate checks the plan's refusals, above all of shared MACs: the members of one
// bond may share one (802.3ad gives the slaves the bond's MAC), nothing else may.
func TestValidate(t *testing.T) {
	const mac, other = "02:00:00:00:00:01", "02:00:00:00:00:02"
	bond := func(name, hw string) Link { return Link{Name: name, Role: RoleBond, HardwareAddr: hw, MTU: 9000} }
	slave := func(name, hw, master string) Link {
		return Link{Name: name, Role: RoleBondSlave, HardwareAddr: hw, MTU: 9000, Master: master}
	}
	roce := func(name, hw string) Link { return Link{Name: name, Role: RoleRoCE, HardwareAddr: hw, MTU: 9000} }
	tests := []struct {
		name  string
		links []Link
		// wantErr are substrings of the error; none: valid.
		wantErr []string
	}{
		{name: "802.3ad: both slaves have the bond's MAC",
			links: []Link{bond("bond0", mac), slave("eth0", mac, "bond0"), slave("eth1", mac, "bond0")}},
		{name: "slaves listed before their bond",
			links: []Link{slave("eth0", mac, "bond0"), slave("eth1", mac, "bond0"), bond("bond0", mac)}},
		{name: "the bond has the first slave's MAC, the second its own",
			links: []Link{bond("bond0", mac), slave("eth0", mac, "bond0"), slave("eth1", other, "bond0")}},
		{name: "two slaves share a MAC the bond does not have",
			links: []Link{bond("bond0", other), slave("eth0", mac, "bond0"), slave("eth1", mac, "bond0")}},
		{name: "two bonds, each with its own MAC on its slaves",
			links: []Link{bond("bond0", mac), bond("bond1", other), slave("eth0", mac, "bond0"), slave("eth1", other, "bond1")}},
		{name: "unrelated links",
			links:   []Link{roce("eth0", mac), roce("eth1", mac)},
			wantErr: []string{"netdevs eth0 and eth1 have one MAC 02:00:00:00:00:01", "not one bond"}},
		{name: "a bond and a link outside it",
			links:   []Link{bond("bond0", mac), slave("eth0", mac, "bond0"), roce("eth2", mac)},
			wantErr: []string{"netdevs bond0 and eth2 have one MAC"}},
		{name: "slaves of two bonds",
			links:   []Link{bond("bond0", mac), bond("bond1", other), slave("eth0", mac, "bond0"), slave("eth1", mac, "bond1")},
			wantErr: []string{"netdevs bond0 and eth1 have one MAC"}},
		{name: "two bonds",
			links:   []Link{bond("bond0", mac), bond("bond1", mac)},
			wantErr: []string{"netdevs bond0 and bond1 have one MAC"}},
		{name: "a master that is not planned",
			links:   []Link{slave("eth0", mac, "bond0"), slave("eth1", mac, "bond0")},
			wantErr: []string{"netdev eth0: master bond0 is not a bond of the plan"}},
		{name: "a master that is no bond",
			links:   []Link{roce("eth0", mac), slave("eth1", mac, "eth0")},
			wantErr: []string{"netdev eth1: master eth0 is not a bond of the plan"}},
		{name: "a name planned twice",
			links:   []Link{roce("eth0", mac), roce("eth0", other)},
			wantErr: []string{"netdev eth0 planned twice"}},
		{name: "a multicast MAC",
			links:   []Link{roce("eth0", "03:00:00:00:00:01")},
			wantErr: []string{"netdev eth0: \"03:00:00:00:00:01\" is not a unicast MAC"}},
		{name: "an MTU out of range",
			links:   []Link{{Name: "eth0", Role: RoleRoCE, HardwareAddr: mac, MTU: 67}},
			wantErr: []string{"netdev eth0: MTU 67 out of range"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Plan{Links: tc.links}).Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Errorf("Validate: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted the plan, want an error with %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate: %v, want %q in it", err, want)
				}
			}
		})
	}
}

func TestIPoIBStandInMAC(t *testing.T) {
	hw, _ := net.ParseMAC("00:00:10:49:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:56:d2:a0")
	if got := IPoIBStandInMAC(hw).String(); got != "02:03:00:56:d2:a0" {
		t.Errorf("IPoIBStandInMAC = %s", got)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rec.json")
	if rec, err := ReadRecord(file); err != nil || len(rec.Links) != 0 {
		t.Fatalf("missing record: %+v, %v", rec, err)
	}
	in := &Plan{Links: []Link{{Name: "a", Kind: KindVeth, HardwareAddr: "02:00:00:00:00:01", MTU: 1500,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}, Peer: "rdmock0", PeerHardwareAddr: "02:72:64:6d:00:00"}}}
	if err := WriteRecord(file, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadRecord(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
}

// TestCreateRemoveInPrivateNetns makes the dgx-h100, mixed-bond and gb200 stand-ins (the
// last a bond whose slaves have its MAC) in a private network namespace with the kernel's
// real netlink, checks them, makes them again over the leftovers, refuses a foreign
// interface of a planned name without touching it, and removes exactly what it made. It
// needs root (CAP_NET_ADMIN for a new namespace).
func TestCreateRemoveInPrivateNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private network namespace")
	}
	kernel, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel: %s", kernel)
	if _, err := kernel.PortKind(); err != nil {
		t.Skip(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, profile := range []string{"dgx-h100", "mixed-bond", "gb200"} {
		t.Run(profile, func(t *testing.T) {
			plan := planProfile(t, profile)
			if hasBond(plan) && !kernel[KindBridge] {
				t.Skip("no bridge in this kernel")
			}
			err := InPrivateNetns(func(h *netlink.Handle) error {
				var saved *Plan
				o := CreateOptions{Kernel: kernel, NodeIP: netip.MustParseAddr("192.0.2.2"), Log: log,
					Save: func(p *Plan) error { saved = p; return nil }}
				rec, err := Create(h, plan, o)
				if err != nil {
					return err
				}
				if len(rec.Links) != len(plan.Links) || len(saved.Links) != len(plan.Links) {
					t.Errorf("record has %d links, saved %d, plan %d", len(rec.Links), len(saved.Links), len(plan.Links))
				}
				checkLinks(t, h, rec)
				// Again, over the leftovers of the "earlier run".
				if rec, err = Create(h, plan, o); err != nil {
					return err
				}
				checkLinks(t, h, rec)
				// A foreign interface that holds a planned name is refused and kept.
				if err := Remove(h, rec, log); err != nil {
					return err
				}
				foreign := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: plan.Links[0].Name}}
				if !kernel[KindBridge] {
					t.Log("no bridge: foreign-interface check skipped")
				} else {
					if err := h.LinkAdd(foreign); err != nil {
						return err
					}
					_, err := Create(h, plan, o)
					if !errors.Is(err, errNotOurs) {
						t.Errorf("Create over a foreign %s: %v, want a refusal", foreign.Name, err)
					}
					if _, err := h.LinkByName(foreign.Name); err != nil {
						t.Errorf("the foreign interface is gone: %v", err)
					}
					if err := h.LinkDel(foreign); err != nil {
						return err
					}
				}
				links, err := h.LinkList()
				if err != nil {
					return err
				}
				for _, l := range links {
					if l.Attrs().Name != "lo" {
						t.Errorf("left after Remove: %s (%s)", l.Attrs().Name, l.Type())
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRemoveRenamedBondSlave removes the gb200 stand-ins after a slave of the bond was
// renamed (as a crashed driver may leave one): the other slave, which has the same kind
// and MAC under its recorded name, must not be taken for it, and nothing may be left.
// It needs root, like TestCreateRemoveInPrivateNetns.
func TestRemoveRenamedBondSlave(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private network namespace")
	}
	kernel, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kernel.PortKind(); err != nil || !kernel[KindBridge] {
		t.Skipf("needs a port kind and bridge: %s", kernel)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	plan := planProfile(t, "gb200")
	// The later slave: Remove goes backwards, so it is looked for first, while the
	// earlier one still has its recorded name.
	const renamed = "enP6p3s0f1np1"
	err = InPrivateNetns(func(h *netlink.Handle) error {
		rec, err := Create(h, plan, CreateOptions{Kernel: kernel, Log: log, Save: func(*Plan) error { return nil }})
		if err != nil {
			return err
		}
		link, err := h.LinkByName(renamed)
		if err != nil {
			return err
		}
		if err := h.LinkSetDown(link); err != nil {
			return err
		}
		if err := h.LinkSetName(link, "net1"); err != nil {
			return fmt.Errorf("rename %s: %w", renamed, err)
		}
		if err := Remove(h, rec, log); err != nil {
			t.Errorf("Remove: %v", err)
		}
		links, err := h.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			if l.Attrs().Name != "lo" {
				t.Errorf("left after Remove: %s (%s, %s)", l.Attrs().Name, l.Type(), l.Attrs().HardwareAddr)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hasBond(p *Plan) bool {
	return slices.ContainsFunc(p.Links, func(l Link) bool { return l.Role == RoleBond })
}

// checkLinks compares the namespace's links with a record: name, kind, MAC, MTU, up,
// addresses, the veth peer up, a slave's master.
func checkLinks(t *testing.T, h *netlink.Handle, rec *Plan) {
	t.Helper()
	for _, l := range rec.Links {
		link, err := h.LinkByName(l.Name)
		if err != nil {
			t.Errorf("%s: %v", l.Name, err)
			continue
		}
		a := link.Attrs()
		if link.Type() != l.Kind || a.HardwareAddr.String() != l.HardwareAddr || a.MTU != l.MTU || a.Flags&net.FlagUp == 0 {
			t.Errorf("%s: kind %s MAC %s MTU %d flags %v, want %s %s %d up", l.Name, link.Type(), a.HardwareAddr, a.MTU, a.Flags, l.Kind, l.HardwareAddr, l.MTU)
		}
		addrs, err := h.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		var got []netip.Prefix
		for _, ad := range addrs {
			p, _ := prefixOf(ad.IPNet)
			ip, _ := netip.AddrFromSlice(ad.IP)
			got = append(got, netip.PrefixFrom(ip.Unmap(), p.Bits()))
		}
		var want []netip.Prefix
		for _, p := range l.Addresses {
			if p.Addr().Is4() {
				want = append(want, p)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: IPv4 addresses %v, want %v", l.Name, got, want)
		}
		if l.Peer != "" {
			peer, err := h.LinkByName(l.Peer)
			if err != nil || peer.Attrs().HardwareAddr.String() != l.PeerHardwareAddr || peer.Attrs().Flags&net.FlagUp == 0 {
				t.Errorf("peer %s of %s: %v %+v", l.Peer, l.Name, err, peer)
			}
		}
		if l.Master != "" {
			master, err := h.LinkByName(l.Master)
			if err != nil || a.MasterIndex != master.Attrs().Index {
				t.Errorf("%s: master index %d, want %s (%v)", l.Name, a.MasterIndex, l.Master, err)
			}
		}
	}
}

// TestAddressPools checks the dgx-h100 pools and that the node configuration accepts them.
func TestAddressPools(t *testing.T) {
	pools := AddressPools(planProfile(t, "dgx-h100"))
	want := []nodeconfig.AddressPool{
		{Name: "enp168s0f0np0", Selector: nodeconfig.Selector{IfNames: []string{"enp168s0f0np0"}}, Subnet: "10.200.0.0/24", RangeStart: "10.200.0.100", RangeEnd: "10.200.0.199", Exclude: []string{"10.200.0.11"}},
		{Name: "enp168s0f1np1", Selector: nodeconfig.Selector{IfNames: []string{"enp168s0f1np1"}}, Subnet: "10.200.1.0/24", RangeStart: "10.200.1.100", RangeEnd: "10.200.1.199", Exclude: []string{"10.200.1.11"}},
		{Name: IPoIBPool, Selector: nodeconfig.Selector{IfNames: []string{"ibp154s0", "ibp192s0", "ibp206s0", "ibp220s0", "ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0"}}, Subnet: "10.201.0.0/24", RangeStart: "10.201.0.100", RangeEnd: "10.201.0.199"},
	}
	if diff := cmp.Diff(want, pools); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	data, err := yaml.Marshal(nodeconfig.Config{Version: nodeconfig.Version, Network: nodeconfig.NetworkConfig{AddressPools: pools}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodeconfig.Parse(data); err != nil {
		t.Errorf("the node configuration refuses the pools: %v\n%s", err, data)
	}
}
