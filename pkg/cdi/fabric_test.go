package cdi

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// noTables fails a test that reads a port table where it should not.
type noTables struct{ t *testing.T }

func (n noTables) PKeyTable(ibdev string, port int) (sysfs.PKeyTable, error) {
	n.t.Errorf("PKeyTable(%s, %d) read", ibdev, port)
	return nil, errors.New("no tables")
}

func (n noTables) GIDIndex(ibdev string, port int, version int, family v1alpha1.AddressFamily) (int, error) {
	n.t.Errorf("GIDIndex(%s, %d, %d, %s) read", ibdev, port, version, family)
	return 0, errors.New("no tables")
}

// fakeTables holds port tables by "ibdev/port"; a GID entry by "ibdev/port v<version>
// <family>". What is not there is an error, as a missing sysfs file would be.
type fakeTables struct {
	pkeys map[string]sysfs.PKeyTable
	gids  map[string]int
}

func (f fakeTables) PKeyTable(ibdev string, port int) (sysfs.PKeyTable, error) {
	t, ok := f.pkeys[fmt.Sprintf("%s/%d", ibdev, port)]
	if !ok {
		return nil, fmt.Errorf("read P_Key table of port %s/%d: no such file", ibdev, port)
	}
	return t, nil
}

func (f fakeTables) GIDIndex(ibdev string, port int, version int, family v1alpha1.AddressFamily) (int, error) {
	i, ok := f.gids[fmt.Sprintf("%s/%d v%d %s", ibdev, port, version, family)]
	if !ok {
		return 0, fmt.Errorf("port %s/%d has no RoCE v%d GID entry of family %s", ibdev, port, version, family)
	}
	return i, nil
}

// tables of the tests: mlx5_0 and mlx5_1 hold 0x8001 at index 1, mlx5_2 at index 2;
// mlx5_3 lacks it. The RoCE ports mlx5_4 and mlx5_5 have IPv4 entries at 3 (v2) and 2
// (v1) and IPv6 at 5 (v2); mlx5_6 has no IPv6 entry.
var tables = fakeTables{
	pkeys: map[string]sysfs.PKeyTable{
		"mlx5_0/1": pkeyTable(0xffff, 0x8001),
		"mlx5_1/1": pkeyTable(0xffff, 0x8001),
		"mlx5_2/1": pkeyTable(0xffff, 0x8002, 0x8001),
		"mlx5_3/1": pkeyTable(0xffff),
	},
	gids: map[string]int{
		"mlx5_4/1 v2 ipv4": 3, "mlx5_4/1 v1 ipv4": 2, "mlx5_4/1 v2 ipv6": 5,
		"mlx5_5/1 v2 ipv4": 3, "mlx5_5/1 v1 ipv4": 2, "mlx5_5/1 v2 ipv6": 5,
		"mlx5_6/1 v2 ipv4": 3,
	},
}

// pkeyTable is a P_Key table holding keys at indices 0, 1, ...
func pkeyTable(keys ...uint16) sysfs.PKeyTable {
	t := make(sysfs.PKeyTable, len(keys))
	for i, k := range keys {
		t[i] = sysfs.PKeyEntry{Index: i, PKey: k}
	}
	return t
}

// fab is a defaulted config with the fabric section decoded from JSON.
func fab(t *testing.T, fabric string, change ...func(*v1alpha1.RdmaConfig)) v1alpha1.RdmaConfig {
	t.Helper()
	c, err := v1alpha1.DecodeConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","fabric":` + fabric + `}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range change {
		ch(c)
	}
	c.Default()
	return *c
}

func TestFabricEnv(t *testing.T) {
	const ibAll = `{"trafficClass":106,"serviceLevel":3,"adaptiveRouting":true,"qpsPerConnection":4,"pkey":"0x8001","roceVersion":2,"addressFamily":"ipv6","topologyFile":true}`
	ibList := func(devs ...string) []string {
		var hca []string
		for _, d := range devs {
			hca = append(hca, d+":1")
		}
		return []string{"NCCL_IB_HCA==" + strings.Join(hca, ","), "UCX_NET_DEVICES=" + strings.Join(hca, ","), "RDMA_DEVICES=" + strings.Join(devs, ",")}
	}
	tests := []struct {
		name    string
		devices func(t *testing.T) []ClaimDevice
		want    []string // after NCCL_IB_HCA (and the GID index), UCX_NET_DEVICES and RDMA_DEVICES
		wantGID []string // NCCL_IB_GID_INDEX and UCX_IB_GID_INDEX, when set
	}{
		{
			name: "InfiniBand only: the RoCE settings stay out",
			devices: func(t *testing.T) []ClaimDevice {
				c := fab(t, ibAll)
				return []ClaimDevice{exclusive("nics", ib("mlx5_0", 1, 0, 0), c), exclusive("nics", ib("mlx5_1", 1, 1, 1), c)}
			},
			want: []string{
				"NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106", "NCCL_IB_SL=3", "UCX_IB_SL=3",
				"NCCL_IB_ADAPTIVE_ROUTING=1", "UCX_IB_AR_ENABLE=y", "NCCL_IB_QPS_PER_CONNECTION=4",
				"NCCL_IB_PKEY=1", "UCX_IB_PKEY=0x0001",
			},
		},
		{
			name: "RoCE only: the P_Key stays out, the GID index follows the family",
			devices: func(t *testing.T) []ClaimDevice {
				c := fab(t, `{"trafficClass":106,"adaptiveRouting":false,"pkey":"0x8001","roceVersion":2,"addressFamily":"ipv6"}`)
				return []ClaimDevice{exclusive("nics", roce("mlx5_4", 1, 4, 4, ptr.To(3)), c), exclusive("nics", roce("mlx5_5", 1, 5, 5, ptr.To(3)), c)}
			},
			wantGID: []string{"NCCL_IB_GID_INDEX=5", "UCX_IB_GID_INDEX=5"},
			want: []string{
				"NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106", "NCCL_IB_ADAPTIVE_ROUTING=0", "UCX_IB_AR_ENABLE=n",
				"NCCL_IB_ROCE_VERSION_NUM=2", "NCCL_IB_ADDR_FAMILY=AF_INET6",
			},
		},
		{
			name: "RoCE v1 alone takes NCCL's default family",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{exclusive("nics", roce("mlx5_4", 1, 4, 4, ptr.To(3)), fab(t, `{"roceVersion":1}`))}
			},
			wantGID: []string{"NCCL_IB_GID_INDEX=2", "UCX_IB_GID_INDEX=2"},
			want:    []string{"NCCL_IB_ROCE_VERSION_NUM=1"},
		},
		{
			name: "a fixed gidIndex wins over the family, and reads no table",
			devices: func(t *testing.T) []ClaimDevice {
				c := fab(t, `{"addressFamily":"ipv6"}`, func(c *v1alpha1.RdmaConfig) { c.GIDIndex = ptr.To(v1alpha1.GIDIndexPolicy("7")) })
				return []ClaimDevice{exclusive("nics", roce("mlx5_6", 1, 6, 6, nil), c)}
			},
			wantGID: []string{"NCCL_IB_GID_INDEX=7"},
			want:    []string{"NCCL_IB_ADDR_FAMILY=AF_INET6"},
		},
		{
			name: "gidIndex none: NCCL picks by the family itself",
			devices: func(t *testing.T) []ClaimDevice {
				c := fab(t, `{"addressFamily":"ipv6"}`, func(c *v1alpha1.RdmaConfig) { c.GIDIndex = ptr.To(v1alpha1.GIDIndexNone) })
				return []ClaimDevice{exclusive("nics", roce("mlx5_6", 1, 6, 6, nil), c)}
			},
			want: []string{"NCCL_IB_ADDR_FAMILY=AF_INET6"},
		},
		{
			name: "mixed InfiniBand and RoCE: each setting where it acts, no GID index",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{
					exclusive("ib", ib("mlx5_0", 1, 0, 0), fab(t, `{"trafficClass":106,"pkey":"0x8001"}`)),
					exclusive("eth", roce("mlx5_4", 1, 4, 4, ptr.To(3)), fab(t, `{"trafficClass":106,"addressFamily":"ipv4"}`)),
				}
			},
			want: []string{"NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106", "NCCL_IB_PKEY=1", "UCX_IB_PKEY=0x0001", "NCCL_IB_ADDR_FAMILY=AF_INET"},
		},
		{
			name: "a request with ncclEnv off takes no part, nor does its disagreement",
			devices: func(t *testing.T) []ClaimDevice {
				off := fab(t, `{"trafficClass":96,"pkey":"0x8009"}`, func(c *v1alpha1.RdmaConfig) { c.NCCLEnv = ptr.To(false) })
				return []ClaimDevice{exclusive("sm", ib("mlx5_3", 1, 3, 3), off), exclusive("nic", ib("mlx5_0", 1, 0, 0), fab(t, `{"trafficClass":106}`))}
			},
			want: []string{"NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106"},
		},
		{
			name: "a limited key takes the full entry; UCX gets the partition",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{exclusive("nic", ib("mlx5_2", 1, 2, 2), fab(t, `{"pkey":"0x0001"}`))}
			},
			want: []string{"NCCL_IB_PKEY=2", "UCX_IB_PKEY=0x0001"},
		},
		{
			name: "the default partition",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{exclusive("nic", ib("mlx5_3", 1, 3, 3), fab(t, `{"pkey":"0xffff"}`))}
			},
			want: []string{"NCCL_IB_PKEY=0", "UCX_IB_PKEY=0x7fff"},
		},
		{
			name: "only topologyFile: nothing here",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{exclusive("nic", ib("mlx5_0", 1, 0, 0), fab(t, `{"topologyFile":true}`))}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			devices := tc.devices(t)
			got, err := envFor(ctx, devices, configsOf(devices), tables)
			if err != nil {
				t.Fatal(err)
			}
			var devs []string
			for _, d := range devices {
				if *d.Config.NCCLEnv && !slices.Contains(devs, d.Port.IBDev) {
					devs = append(devs, d.Port.IBDev)
				}
			}
			lists := ibList(devs...)
			want := append(append(append([]string{lists[0]}, tc.wantGID...), lists[1:]...), tc.want...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestFabricEnvRefuses: what makes prepare fail, with a message that names what to fix.
func TestFabricEnvRefuses(t *testing.T) {
	tests := []struct {
		name    string
		devices func(t *testing.T) []ClaimDevice
		want    string
	}{
		{
			name: "requests disagree on a value",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{exclusive("a", ib("mlx5_0", 1, 0, 0), fab(t, `{"trafficClass":106}`)), exclusive("b", ib("mlx5_1", 1, 1, 1), fab(t, `{"trafficClass":104}`))}
			},
			want: `the requests of the claim disagree on fabric.trafficClass (request "a": 106, request "b": 104); the claim's containers share one environment, so every request with ncclEnv on must set the same value`,
		},
		{
			name: "one request sets what the other leaves unset",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{exclusive("a", ib("mlx5_0", 1, 0, 0), fab(t, `{"serviceLevel":3}`)), exclusive("b", ib("mlx5_1", 1, 1, 1), cfg(nil))}
			},
			want: `disagree on fabric.serviceLevel (request "a": 3, request "b": unset)`,
		},
		{
			name: "InfiniBand requests disagree on the P_Key",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{
					exclusive("a", ib("mlx5_0", 1, 0, 0), fab(t, `{"pkey":"0x8001"}`)),
					exclusive("b", ib("mlx5_1", 1, 1, 1), fab(t, `{"pkey":"0x8002"}`)),
					exclusive("c", roce("mlx5_4", 1, 4, 4, ptr.To(3)), fab(t, `{"pkey":"0x8003"}`)),
				}
			},
			want: `disagree on fabric.pkey (request "a": 0x8001, request "b": 0x8002); the claim's containers share one environment, so every request with ncclEnv on and InfiniBand ports must set the same value`,
		},
		{
			name: "a port lacks the P_Key",
			devices: func(t *testing.T) []ClaimDevice {
				c := fab(t, `{"pkey":"0x8001"}`)
				return []ClaimDevice{exclusive("nics", ib("mlx5_0", 1, 0, 0), c), exclusive("nics", ib("mlx5_3", 1, 3, 3), c)}
			},
			want: `fabric.pkey 0x8001: port mlx5_3/1 does not hold it (P_Key table [0]=0xffff)`,
		},
		{
			name: "ports hold the P_Key at different indices",
			devices: func(t *testing.T) []ClaimDevice {
				c := fab(t, `{"pkey":"0x8001"}`)
				return []ClaimDevice{exclusive("nics", ib("mlx5_0", 1, 0, 0), c), exclusive("nics", ib("mlx5_2", 1, 2, 2), c)}
			},
			want: `fabric.pkey 0x8001: port mlx5_0/1 holds it at index 1 (P_Key table [0]=0xffff [1]=0x8001), port mlx5_2/1 at index 2 (P_Key table [0]=0xffff [1]=0x8002 [2]=0x8001); NCCL_IB_PKEY is one index for every port`,
		},
		{
			name: "a P_Key table that cannot be read",
			devices: func(t *testing.T) []ClaimDevice {
				return []ClaimDevice{exclusive("nic", ib("mlx5_7", 1, 7, 7), fab(t, `{"pkey":"0x8001"}`))}
			},
			want: `fabric.pkey 0x8001: read P_Key table of port mlx5_7/1: no such file`,
		},
		{
			name: "a RoCE port without an entry of the family",
			devices: func(t *testing.T) []ClaimDevice {
				c := fab(t, `{"addressFamily":"ipv6"}`)
				return []ClaimDevice{exclusive("nics", roce("mlx5_4", 1, 4, 4, ptr.To(3)), c), exclusive("nics", roce("mlx5_6", 1, 6, 6, ptr.To(3)), c)}
			},
			want: `GID index of request "nics" for RoCE v2 over ipv6: port mlx5_6/1 has no RoCE v2 GID entry of family ipv6`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			devices := tc.devices(t)
			got, err := envFor(ctx, devices, configsOf(devices), tables)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("envFor = %q, %v\nwant error %q", got, err, tc.want)
			}
			// BuildSpec fails with it: the claim is not prepared.
			if _, _, err := BuildSpec(ctx, testClaimUID, devices, Options{PortTables: tables, Exists: func(string) bool { return true }}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("BuildSpec error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestFabricEnvReadsTablesOnlyWhenAsked: claims without a pkey or a family-following GID
// index never read a port table (noTables fails the test if they do).
func TestFabricEnvReadsTablesOnlyWhenAsked(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := fab(t, `{"trafficClass":106,"serviceLevel":3,"roceVersion":2}`, func(c *v1alpha1.RdmaConfig) { c.GIDIndex = ptr.To(v1alpha1.GIDIndexPolicy("3")) })
	for _, devices := range [][]ClaimDevice{
		{exclusive("nic", roce("mlx5_4", 1, 4, 4, ptr.To(3)), c)},
		{exclusive("nic", ib("mlx5_0", 1, 0, 0), c)},
		{exclusive("a", ib("mlx5_0", 1, 0, 0), fab(t, `{"addressFamily":"ipv6"}`)), exclusive("b", roce("mlx5_4", 1, 4, 4, ptr.To(3)), fab(t, `{"addressFamily":"ipv6"}`))},
	} {
		if _, err := envFor(ctx, devices, configsOf(devices), noTables{t}); err != nil {
			t.Errorf("%s: %v", devices[0].Device, err)
		}
	}
}

func configsOf(devices []ClaimDevice) []*v1alpha1.RdmaConfig {
	configs := make([]*v1alpha1.RdmaConfig, len(devices))
	for i := range devices {
		configs[i] = &devices[i].Config
	}
	return configs
}
