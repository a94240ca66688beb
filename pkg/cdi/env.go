package cdi

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// Environment variables a claim's containers get.
const (
	EnvNCCLHCA      = "NCCL_IB_HCA"
	EnvNCCLGIDIndex = "NCCL_IB_GID_INDEX"
	EnvUCXDevices   = "UCX_NET_DEVICES"
	EnvRDMADevices  = "RDMA_DEVICES"
)

// envFor returns the claim's environment. Only ports of requests with ncclEnv take part:
// a request that turns it off (say, a management port next to the training ports) keeps
// its ports out of the lists. Lists keep request order and hold each entry once; the
// fabric settings follow (fabricEnv).
//
// CDI environment is per container and a variable can have one value, so the lists span
// the whole claim; a container that gets only some of the claim's requests still sees
// all of the claim's ports named.
//
// tables are read only for what needs a port's live tables: a fabric.pkey, and the GID
// index of a request with gidIndex auto and a fabric roceVersion or addressFamily.
func envFor(ctx context.Context, devices []ClaimDevice, configs []*v1alpha1.RdmaConfig, tables PortTables) ([]string, error) {
	var hcas, ibdevs []string
	seenHCA, seenDev := map[string]bool{}, map[string]bool{}
	var ports []envPort
	for i := range devices {
		if !*configs[i].NCCLEnv {
			continue
		}
		all := devices[i].AllPorts()
		for j := range all {
			p := &all[j]
			ports = append(ports, envPort{port: p, request: devices[i].Request, cfg: configs[i]})
			if hca := fmt.Sprintf("%s:%d", p.IBDev, p.Port); !seenHCA[hca] {
				seenHCA[hca] = true
				hcas = append(hcas, hca)
			}
			if !seenDev[p.IBDev] {
				seenDev[p.IBDev] = true
				ibdevs = append(ibdevs, p.IBDev)
			}
		}
	}
	if len(ports) == 0 {
		return nil, nil
	}
	list := strings.Join(hcas, ",")
	// The leading '=' makes NCCL match device names exactly, so mlx5_1 does not also
	// select mlx5_10..mlx5_19.
	env := []string{EnvNCCLHCA + "==" + list}
	idx, followed, reason, err := gidIndex(ports, tables)
	switch {
	case err != nil:
		return nil, err
	case reason == "":
		env = append(env, EnvNCCLGIDIndex+"="+strconv.Itoa(idx))
		if followed {
			// UCX picks RoCE v2 IPv4 first whatever NCCL is told; it has no variable
			// for the version or the family, only the index.
			env = append(env, EnvUCXGIDIndex+"="+strconv.Itoa(idx))
		}
	default:
		// Expected for InfiniBand; worth a note where RoCE ports are involved, since
		// NCCL then picks a GID itself and may pick one that does not route.
		v := 4
		if slices.ContainsFunc(ports, func(p envPort) bool { return p.port.LinkLayer == discovery.LinkLayerEthernet }) {
			v = 2
		}
		logger(ctx).V(v).Info("Leaving NCCL_IB_GID_INDEX unset", "reason", reason)
	}
	env = append(env,
		EnvUCXDevices+"="+list,
		EnvRDMADevices+"="+strings.Join(ibdevs, ","),
	)
	fabric, err := fabricEnv(ctx, ports, tables)
	if err != nil {
		return nil, err
	}
	return append(env, fabric...), nil
}

// gidIndex decides NCCL_IB_GID_INDEX for the ports that take part in the environment.
// NCCL takes one value per process, so it is set only when every port is RoCE and all
// of them agree: each port's own policy gives its index, and none anywhere leaves it
// unset. With auto, the index is the one discovery found, unless the port's request sets
// fabric.roceVersion or fabric.addressFamily: then it is the port's lowest routable entry
// of that version and family, read now from the port's table (followed is then true), and
// a port without one fails the claim. A number is that number. InfiniBand addresses by
// LID and must not get one. A non-empty reason says why it stays unset; NCCL then picks
// per port, by NCCL_IB_ROCE_VERSION_NUM and NCCL_IB_ADDR_FAMILY where they are set.
func gidIndex(ports []envPort, tables PortTables) (idx int, followed bool, reason string, err error) {
	// Everything that leaves the index unset is found before any table is read.
	for _, ep := range ports {
		p := ep.port
		if p.LinkLayer != discovery.LinkLayerEthernet {
			return 0, false, fmt.Sprintf("port %s has link layer %q, not Ethernet", portName(p), p.LinkLayer), nil
		}
		if *ep.cfg.GIDIndex == v1alpha1.GIDIndexNone {
			return 0, false, fmt.Sprintf("gidIndex of port %s is none", portName(p)), nil
		}
	}
	idx = -1
	for _, ep := range ports {
		p := ep.port
		var n int
		switch pol := *ep.cfg.GIDIndex; {
		case pol == v1alpha1.GIDIndexAuto && ep.cfg.Fabric.FollowsGID():
			version, family := ep.cfg.Fabric.GIDWant()
			if n, err = tables.GIDIndex(p.IBDev, p.Port, version, family); err != nil {
				return 0, false, "", fmt.Errorf("GID index of request %q for RoCE v%d over %s: %w", ep.request, version, family, err)
			}
			followed = true
		case pol == v1alpha1.GIDIndexAuto:
			if p.GIDIndex == nil {
				return 0, false, fmt.Sprintf("port %s has no usable RoCE v2 GID", portName(p)), nil
			}
			n = *p.GIDIndex
		default:
			n, _ = pol.Index() // validated by BuildSpec
		}
		if idx >= 0 && n != idx {
			return 0, false, fmt.Sprintf("ports disagree on the GID index (%d, and %d on port %s)", idx, n, portName(p)), nil
		}
		idx = n
	}
	return idx, followed, "", nil
}
