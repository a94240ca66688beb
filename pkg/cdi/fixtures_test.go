package cdi

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

const (
	testClaimUID = "0b6f6f7e-3c1a-4f2e-9d8a-1c2b3d4e5f60"
	testShareID  = "5e1d7c2a-8b9f-4a3e-b6c5-d4e3f2a1b0c9"
	testHookPath = "/opt/rdma-dra/bin/rdma-dra-cdi-hook"
)

// The kernel's numbering: uverbs minors start at 192, umad at 0, issm at 64.
const (
	majorIB    = 231
	uverbsBase = 192
	issmBase   = 64
)

// port builds a port of device mlx5_<dev> (uverbs<dev>) with umad/issm number mad
// (-1: the adapter has no MAD devices).
func port(ibdev string, portNum, uverbs, mad int, linkLayer string, gid *int) discovery.Port {
	p := discovery.Port{
		IBDev:     ibdev,
		Port:      portNum,
		LinkLayer: linkLayer,
		State:     "ACTIVE",
		GIDIndex:  gid,
		Verbs:     &discovery.CharDev{Name: fmt.Sprintf("uverbs%d", uverbs), Major: majorIB, Minor: uint32(uverbsBase + uverbs)},
	}
	if mad >= 0 {
		p.UMAD = &discovery.CharDev{Name: fmt.Sprintf("umad%d", mad), Major: majorIB, Minor: uint32(mad)}
		p.ISSM = &discovery.CharDev{Name: fmt.Sprintf("issm%d", mad), Major: majorIB, Minor: uint32(issmBase + mad)}
	}
	return p
}

func ib(ibdev string, portNum, uverbs, mad int) discovery.Port {
	return port(ibdev, portNum, uverbs, mad, discovery.LinkLayerInfiniBand, nil)
}

func roce(ibdev string, portNum, uverbs, mad int, gid *int) discovery.Port {
	return port(ibdev, portNum, uverbs, mad, discovery.LinkLayerEthernet, gid)
}

// cfg is a defaulted config with changes applied, as the plugin would pass it.
func cfg(change func(*v1alpha1.RdmaConfig)) v1alpha1.RdmaConfig {
	c := v1alpha1.RdmaConfig{}
	if change != nil {
		change(&c)
	}
	c.Default()
	return c
}

// exclusive is the exclusive device of a port in a request, with config c.
func exclusive(request string, p discovery.Port, c v1alpha1.RdmaConfig) ClaimDevice {
	return ClaimDevice{Request: request, Device: devicemodel.DeviceName(p.IBDev, p.Port), Port: p, Config: c}
}

// shared is one share of the shared device of a port.
func shared(request, shareID string, p discovery.Port, c v1alpha1.RdmaConfig) ClaimDevice {
	d := exclusive(request, p, c)
	d.Device += devicemodel.SharedSuffix
	d.ShareID = shareID
	return d
}

// specCase is one claim to build a spec for; the golden and the injection tests share
// the cases.
type specCase struct {
	name    string
	devices []ClaimDevice
	// missing names host nodes below /dev/infiniband that do not exist.
	missing []string
	// wantEnv is the claim's environment; wantHookArgs the memlock hook's arguments.
	wantEnv      []string
	wantHookArgs []string
}

func (c specCase) exists(path string) bool {
	for _, m := range c.missing {
		if filepath.Base(path) == m {
			return false
		}
	}
	return true
}

func specCases() []specCase {
	def := cfg(nil)
	var eight []ClaimDevice
	var eightHCA, eightDevs []string
	for i := range 8 {
		ibdev := fmt.Sprintf("mlx5_%d", i)
		eight = append(eight, exclusive("nics", ib(ibdev, 1, i, i), def))
		eightHCA = append(eightHCA, ibdev+":1")
		eightDevs = append(eightDevs, ibdev)
	}
	hook := func(limit string) []string { return []string{"rdma-dra-cdi-hook", "memlock", "--limit", limit} }
	return []specCase{
		{
			name:    "one-ib-port",
			devices: []ClaimDevice{exclusive("nic", ib("mlx5_0", 1, 0, 0), def)},
			wantEnv: []string{"NCCL_IB_HCA==mlx5_0:1", "UCX_NET_DEVICES=mlx5_0:1", "RDMA_DEVICES=mlx5_0"},
		},
		{
			name:    "eight-ib-ports",
			devices: eight,
			wantEnv: []string{
				"NCCL_IB_HCA==" + strings.Join(eightHCA, ","),
				"UCX_NET_DEVICES=" + strings.Join(eightHCA, ","),
				"RDMA_DEVICES=" + strings.Join(eightDevs, ","),
			},
		},
		{
			name:    "shared-roce-with-share-id",
			devices: []ClaimDevice{shared("nic", testShareID, roce("mlx5_bond_0", 1, 0, 0, ptr.To(3)), def)},
			wantEnv: []string{"NCCL_IB_HCA==mlx5_bond_0:1", "NCCL_IB_GID_INDEX=3", "UCX_NET_DEVICES=mlx5_bond_0:1", "RDMA_DEVICES=mlx5_bond_0"},
		},
		{
			name: "mixed-ib-and-roce",
			devices: []ClaimDevice{
				exclusive("ib", ib("mlx5_0", 1, 0, 0), def),
				exclusive("eth", roce("mlx5_4", 1, 4, 4, ptr.To(3)), def),
			},
			wantEnv: []string{"NCCL_IB_HCA==mlx5_0:1,mlx5_4:1", "UCX_NET_DEVICES=mlx5_0:1,mlx5_4:1", "RDMA_DEVICES=mlx5_0,mlx5_4"},
		},
		{
			name: "roce-gid-index-disagrees",
			devices: []ClaimDevice{
				exclusive("nics", roce("mlx5_2", 1, 2, 2, ptr.To(3)), def),
				exclusive("nics", roce("mlx5_3", 1, 3, 3, ptr.To(5)), def),
			},
			wantEnv: []string{"NCCL_IB_HCA==mlx5_2:1,mlx5_3:1", "UCX_NET_DEVICES=mlx5_2:1,mlx5_3:1", "RDMA_DEVICES=mlx5_2,mlx5_3"},
		},
		{
			name: "roce-gid-index-given",
			devices: []ClaimDevice{
				exclusive("nics", roce("mlx5_2", 1, 2, 2, ptr.To(3)), cfg(func(c *v1alpha1.RdmaConfig) { c.GIDIndex = ptr.To(v1alpha1.GIDIndexPolicy("1")) })),
				exclusive("nics", roce("mlx5_3", 1, 3, 3, nil), cfg(func(c *v1alpha1.RdmaConfig) { c.GIDIndex = ptr.To(v1alpha1.GIDIndexPolicy("1")) })),
			},
			wantEnv: []string{"NCCL_IB_HCA==mlx5_2:1,mlx5_3:1", "NCCL_IB_GID_INDEX=1", "UCX_NET_DEVICES=mlx5_2:1,mlx5_3:1", "RDMA_DEVICES=mlx5_2,mlx5_3"},
		},
		{
			name: "dual-port-adapter",
			devices: []ClaimDevice{
				exclusive("nics", ib("mlx5_0", 1, 0, 0), def),
				exclusive("nics", ib("mlx5_0", 2, 0, 1), def),
			},
			wantEnv: []string{"NCCL_IB_HCA==mlx5_0:1,mlx5_0:2", "UCX_NET_DEVICES=mlx5_0:1,mlx5_0:2", "RDMA_DEVICES=mlx5_0"},
		},
		{
			name:    "verbs-only",
			devices: []ClaimDevice{exclusive("nic", ib("mlx5_0", 1, 0, 0), cfg(func(c *v1alpha1.RdmaConfig) { c.CharDevices = ptr.To(v1alpha1.CharDevicesVerbs) }))},
			wantEnv: []string{"NCCL_IB_HCA==mlx5_0:1", "UCX_NET_DEVICES=mlx5_0:1", "RDMA_DEVICES=mlx5_0"},
		},
		{
			name: "management",
			devices: []ClaimDevice{
				exclusive("sm", ib("mlx5_1", 1, 1, 1), cfg(func(c *v1alpha1.RdmaConfig) {
					c.CharDevices = ptr.To(v1alpha1.CharDevicesManagement)
					c.NCCLEnv = ptr.To(false)
				})),
			},
		},
		{
			name: "memlock",
			devices: []ClaimDevice{
				exclusive("a", ib("mlx5_0", 1, 0, 0), cfg(func(c *v1alpha1.RdmaConfig) { c.Memlock = ptr.To(v1alpha1.MemlockPolicy("1Gi")) })),
				exclusive("b", ib("mlx5_1", 1, 1, 1), cfg(func(c *v1alpha1.RdmaConfig) { c.Memlock = ptr.To(v1alpha1.MemlockPolicy("64Gi")) })),
				exclusive("c", ib("mlx5_2", 1, 2, 2), def),
			},
			wantEnv:      []string{"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1", "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1,mlx5_2:1", "RDMA_DEVICES=mlx5_0,mlx5_1,mlx5_2"},
			wantHookArgs: hook("68719476736"),
		},
		{
			name:    "adapter-without-mad",
			devices: []ClaimDevice{exclusive("nic", roce("irdma_0", 1, 0, -1, ptr.To(1)), cfg(func(c *v1alpha1.RdmaConfig) { c.CharDevices = ptr.To(v1alpha1.CharDevicesManagement) }))},
			wantEnv: []string{"NCCL_IB_HCA==irdma_0:1", "NCCL_IB_GID_INDEX=1", "UCX_NET_DEVICES=irdma_0:1", "RDMA_DEVICES=irdma_0"},
		},
		{
			// The device plugin's unit: one device of a legacy resource stands for every
			// rail, a dual-port RDMA device among them whose uverbs node goes in once.
			name: "legacy-device-all-rails",
			devices: []ClaimDevice{func() ClaimDevice {
				ports := []discovery.Port{ib("mlx5_0", 1, 0, 0), ib("mlx5_1", 1, 1, 1), ib("mlx4_0", 1, 2, 2), ib("mlx4_0", 2, 2, 3)}
				c := cfg(func(c *v1alpha1.RdmaConfig) { c.CharDevices = ptr.To(v1alpha1.CharDevicesVerbs) })
				return ClaimDevice{Request: "rdma", Device: "legacy-hca-shared-devices-a", ShareID: testShareID, Port: ports[0], Ports: ports, Config: c}
			}()},
			wantEnv: []string{
				"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx4_0:1,mlx4_0:2",
				"UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1,mlx4_0:1,mlx4_0:2",
				"RDMA_DEVICES=mlx5_0,mlx5_1,mlx4_0",
			},
		},
		{
			name:    "no-rdma-cm-no-env",
			devices: []ClaimDevice{exclusive("nic", ib("mlx5_0", 1, 0, 0), cfg(func(c *v1alpha1.RdmaConfig) { c.NCCLEnv = ptr.To(false) }))},
			missing: []string{"rdma_cm", "umad0"},
		},
	}
}
