package checkpoint

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

// testdata/network-v1.json is a checkpoint as the release before typed network records
// wrote it (captured from the plugin's own prepare and attach with a fake attacher): one
// claim attached into its pod, one prepared for two pods and not yet attached.

// TestNetworkRecordOfEarlierReleaseRoundTrip loads that file and saves it again: the
// result is the same JSON, plus the version of each network record.
func TestNetworkRecordOfEarlierReleaseRoundTrip(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "network-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, dir := newTestStore(t, "boot-1")
	if err := os.WriteFile(filepath.Join(dir, FileName), golden, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := load(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.QuarantinedTo != "" || len(loaded.Stale) != 0 {
		t.Fatalf("the file of an earlier release was not taken as it is: %+v", loaded)
	}
	attached := loaded.Checkpoint.Claims["e8b7be43-0000-4000-8000-000000000001"].Network
	if attached == nil || attached.Version != 1 || len(attached.Devices) != 1 || len(attached.Devices[0].Attachments) != 1 {
		t.Fatalf("network record of the attached claim: %+v", attached)
	}
	if st := attached.Devices[0].Attachment("pod-a").State; st.Phase != netattach.PhaseAttached || st.GIDIndex == nil || *st.GIDIndex != 7 ||
		len(st.PodAddresses) != 1 || st.PodAddresses[0] != netip.MustParsePrefix("192.168.77.100/24") {
		t.Errorf("attachment of pod-a: %+v", st)
	}
	if err := s.Save(loaded.Checkpoint); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	// Without the versions, what was saved is what was loaded, field for field.
	got, want := generic(t, saved), generic(t, golden)
	for uid, c := range got["claims"].(map[string]any) {
		net, ok := c.(map[string]any)["network"].(map[string]any)
		if !ok {
			continue
		}
		if v := net["version"]; v != float64(NetworkVersion) {
			t.Errorf("entry %s: saved network record has version %v, want %d", uid, v, NetworkVersion)
		}
		delete(net, "version")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("saved again (-earlier release +now, versions left out):\n%s", diff)
	}
	// And what was saved loads as it was.
	again, err := Decode(saved)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(loaded.Checkpoint, again, netipEqual); diff != "" {
		t.Errorf("load of the saved file (-first load +second):\n%s", diff)
	}
}

// netipEqual compares the addresses of attachments by value.
var netipEqual = cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})

func generic(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNetworkRecordShapes decodes the network records earlier releases wrote, and
// records this one refuses.
func TestNetworkRecordShapes(t *testing.T) {
	const uid = "e8b7be43-0000-4000-8000-000000000001"
	macvlan := v1alpha1.NetworkModeMacvlan
	move := v1alpha1.NetworkModeMove
	for _, tc := range []struct {
		name string
		// network is the entry's "network" member; empty leaves it out.
		network string
		want    *Network
		wantErr error
	}{
		{name: "no network member", want: nil},
		{name: "null", network: `null`, want: nil},
		{
			// Plugins before the class's allowedNetwork recorded no policy, and those
			// before the status conditions no generation.
			name:    "before the policy and the generation",
			network: `{"pods":["pod-a"],"devices":[{"request":"rdma","pool":"p","device":"d","ibdev":"mlx5_0","port":1,"linkLayer":"Ethernet","netdev":"eth0","config":{"mode":"macvlan"},"gidPolicy":"auto"}]}`,
			want: &Network{Version: 1, Pods: []string{"pod-a"}, Devices: []NetworkDevice{{
				Request: "rdma", Pool: "p", Device: "d", IBDev: "mlx5_0", Port: 1, LinkLayer: "Ethernet", Netdev: "eth0",
				Config: v1alpha1.NetworkConfig{Mode: &macvlan}, GIDPolicy: v1alpha1.GIDIndexAuto,
			}}},
		},
		{
			name: "a stale device moved into a pod, interrupted",
			network: `{"pods":["pod-a"],"generation":3,"devices":[{"request":"rdma","pool":"p","device":"d","ibdev":"mlx5_0","port":1,"linkLayer":"Ethernet","netdev":"eth0","config":{"mode":"move"},"gidPolicy":"host","moveRDMA":true,"policy":{},"stale":true,` +
				`"attachments":[{"pod":"pod-a","state":{"spec":{"mode":"move","hostNetdev":"eth0","podIfName":"rdma0","rdmaDevice":"mlx5_0"},"target":{"podUID":"pod-a","netnsPath":"/var/run/netns/a"},"phase":"Detaching",` +
				`"host":{"name":"eth0","hardwareAddr":"02:00:00:00:00:02","type":"device","mtu":1500,"up":true,"addresses":["10.0.0.2/24"],"routes":[{"dst":"10.1.0.0/16","gateway":"10.0.0.1","table":100}]},"podIndex":4,"rdmaMoved":true}}]}]}`,
			want: &Network{Version: 1, Pods: []string{"pod-a"}, Generation: 3, Devices: []NetworkDevice{{
				Request: "rdma", Pool: "p", Device: "d", IBDev: "mlx5_0", Port: 1, LinkLayer: "Ethernet", Netdev: "eth0",
				Config: v1alpha1.NetworkConfig{Mode: &move}, GIDPolicy: v1alpha1.GIDIndexPolicy("host"), MoveRDMA: true,
				Policy: &NetworkPolicy{}, Stale: true,
				Attachments: []PodAttachment{{Pod: "pod-a", State: netattach.State{
					Spec:   netattach.Spec{Mode: netattach.ModeMove, HostNetdev: "eth0", PodIfName: "rdma0", RDMADevice: "mlx5_0"},
					Target: netattach.Target{PodUID: "pod-a", NetnsPath: "/var/run/netns/a"}, Phase: netattach.PhaseDetaching,
					Host: &netattach.HostSnapshot{Name: "eth0", HardwareAddr: "02:00:00:00:00:02", Type: "device", MTU: 1500, Up: true,
						Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")},
						Routes:    []netattach.HostRoute{{Dst: netip.MustParsePrefix("10.1.0.0/16"), Gateway: netip.MustParseAddr("10.0.0.1"), Table: 100}}},
					PodIndex: 4, RDMAMoved: true,
				}}},
			}}},
		},
		{
			name:    "version 1 written by this release",
			network: `{"version":1,"pods":["pod-a"],"devices":[{"request":"rdma","pool":"p","device":"d","ibdev":"mlx5_0","port":1,"linkLayer":"InfiniBand","config":{},"gidPolicy":"auto"}]}`,
			want: &Network{Version: 1, Pods: []string{"pod-a"}, Devices: []NetworkDevice{{
				Request: "rdma", Pool: "p", Device: "d", IBDev: "mlx5_0", Port: 1, LinkLayer: "InfiniBand", GIDPolicy: v1alpha1.GIDIndexAuto,
			}}},
		},
		{name: "a newer version", network: `{"version":2,"devices":[]}`, wantErr: ErrFutureVersion},
		{name: "a negative version", network: `{"version":-1}`, wantErr: ErrCorrupt},
		{name: "not an object", network: `"pods"`, wantErr: ErrCorrupt},
		{name: "a member of the wrong type", network: `{"devices":{"request":"rdma"}}`, wantErr: ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entry := `{"uid":"` + uid + `","namespace":"ns","name":"a","phase":"PrepareCompleted","devices":[],"updatedAt":"2026-03-04T05:06:07Z"`
			if tc.network != "" {
				entry += `,"network":` + tc.network
			}
			cp, err := Decode([]byte(`{"version":1,"bootID":"boot-1","claims":{"` + uid + `":` + entry + `}}}`))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cp.Claims[uid].Network, netipEqual); diff != "" {
				t.Errorf("network record (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetNetwork(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    *Network
		want *Network
	}{
		{name: "nil removes", n: nil, want: nil},
		{name: "no devices removes", n: &Network{Pods: []string{"pod-a"}}, want: nil},
		{name: "stamps the version", n: &Network{Devices: []NetworkDevice{{Device: "d"}}}, want: &Network{Version: NetworkVersion, Devices: []NetworkDevice{{Device: "d"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Claim{Network: &Network{Version: 1, Devices: []NetworkDevice{{Device: "old"}}}}
			c.SetNetwork(tc.n)
			if diff := cmp.Diff(tc.want, c.Network); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCloneSharesNoNetworkState changes everything a clone's network record reaches
// and checks that the original stayed as it was.
func TestCloneSharesNoNetworkState(t *testing.T) {
	c := sampleClaim(testUID("u1"), PhasePrepareCompleted)
	c.Network.Devices[0].Config.Addresses = []string{"10.0.0.5/24"}
	c.Network.Devices[0].Config.MTU = ptr.To(int32(9000))
	c.Network.Devices[0].Policy = &NetworkPolicy{AddressPools: []string{"storage"}}
	c.Network.Devices[0].Attachments[0].State = netattach.State{
		Spec:         netattach.Spec{Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}, Routes: []netattach.Route{{Dst: netip.MustParsePrefix("10.1.0.0/16")}}},
		PodAddresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")},
		GIDIndex:     ptr.To(3),
		Host:         &netattach.HostSnapshot{Name: "eth0", Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}, Routes: []netattach.HostRoute{{Table: 1}}},
	}
	before, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Clone()
	n := cl.Network
	n.Pods[0] = "changed"
	nd := &n.Devices[0]
	nd.Config.Addresses[0] = "changed"
	*nd.Config.MTU = 1
	nd.Policy.AddressPools[0] = "changed"
	st := &nd.Attachments[0].State
	st.Spec.Addresses[0] = netip.Prefix{}
	st.Spec.Routes[0].Dst = netip.Prefix{}
	st.PodAddresses[0] = netip.Prefix{}
	*st.GIDIndex = 99
	st.Host.Name = "changed"
	st.Host.Addresses[0] = netip.Prefix{}
	st.Host.Routes[0].Table = 2
	nd.Attachments[0].Pod = "changed"
	after, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("changing the clone changed the original (-before +after):\n%s", diff)
	}
}

func TestNetworkPods(t *testing.T) {
	n := &Network{Pods: []string{"pod-b"}, Devices: []NetworkDevice{{Attachments: []PodAttachment{{Pod: "pod-x"}, {Pod: "pod-y"}}}}}
	if !n.MergePods([]string{"pod-c", "pod-a", "pod-b"}) {
		t.Error("MergePods of new pods reported no change")
	}
	if n.MergePods([]string{"pod-a"}) {
		t.Error("MergePods of known pods reported a change")
	}
	if diff := cmp.Diff([]string{"pod-a", "pod-b", "pod-c"}, n.Pods); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if !n.HasPod("pod-c") || n.HasPod("pod-x") {
		t.Errorf("HasPod: reserved pods %v", n.Pods)
	}
	if !n.AttachedTo("pod-y") || n.AttachedTo("pod-a") {
		t.Error("AttachedTo does not follow the attachments")
	}
	n.Devices[0].DropAttachment("pod-x")
	if n.Devices[0].Attachment("pod-x") != nil || n.Devices[0].Attachment("pod-y") == nil {
		t.Errorf("after DropAttachment(pod-x): %+v", n.Devices[0].Attachments)
	}
}
