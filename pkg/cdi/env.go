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
// its ports out of the lists. Lists keep request order and hold each entry once.
//
// CDI environment is per container and a variable can have one value, so the lists span
// the whole claim; a container that gets only some of the claim's requests still sees
// all of the claim's ports named.
func envFor(ctx context.Context, devices []ClaimDevice, configs []*v1alpha1.RdmaConfig) []string {
	var hcas, ibdevs []string
	seenHCA, seenDev := map[string]bool{}, map[string]bool{}
	var ports []*discovery.Port
	var policies []v1alpha1.GIDIndexPolicy
	for i := range devices {
		if !*configs[i].NCCLEnv {
			continue
		}
		all := devices[i].AllPorts()
		for j := range all {
			p := &all[j]
			ports = append(ports, p)
			policies = append(policies, *configs[i].GIDIndex)
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
		return nil
	}
	list := strings.Join(hcas, ",")
	// The leading '=' makes NCCL match device names exactly, so mlx5_1 does not also
	// select mlx5_10..mlx5_19.
	env := []string{EnvNCCLHCA + "==" + list}
	if idx, reason := gidIndex(ports, policies); reason == "" {
		env = append(env, EnvNCCLGIDIndex+"="+strconv.Itoa(idx))
	} else {
		// Expected for InfiniBand; worth a note where RoCE ports are involved, since
		// NCCL then picks a GID itself and may pick one that does not route.
		v := 4
		if slices.ContainsFunc(ports, func(p *discovery.Port) bool { return p.LinkLayer == discovery.LinkLayerEthernet }) {
			v = 2
		}
		logger(ctx).V(v).Info("Leaving NCCL_IB_GID_INDEX unset", "reason", reason)
	}
	env = append(env,
		EnvUCXDevices+"="+list,
		EnvRDMADevices+"="+strings.Join(ibdevs, ","),
	)
	return env
}

// gidIndex decides NCCL_IB_GID_INDEX for the ports that take part in the environment.
// NCCL takes one value per process, so it is set only when every port is RoCE and all
// of them agree: each port's own policy gives its index (auto: the one discovery found;
// a number: that number), and none anywhere leaves it unset. InfiniBand addresses by LID
// and must not get one. A non-empty reason says why it stays unset.
func gidIndex(ports []*discovery.Port, policies []v1alpha1.GIDIndexPolicy) (int, string) {
	idx := -1
	for i, p := range ports {
		name := fmt.Sprintf("%s/%d", p.IBDev, p.Port)
		if p.LinkLayer != discovery.LinkLayerEthernet {
			return 0, fmt.Sprintf("port %s has link layer %q, not Ethernet", name, p.LinkLayer)
		}
		var n int
		switch pol := policies[i]; pol {
		case v1alpha1.GIDIndexNone:
			return 0, fmt.Sprintf("gidIndex of port %s is none", name)
		case v1alpha1.GIDIndexAuto:
			if p.GIDIndex == nil {
				return 0, fmt.Sprintf("port %s has no usable RoCE v2 GID", name)
			}
			n = *p.GIDIndex
		default:
			n, _ = pol.Index() // validated by BuildSpec
		}
		if idx >= 0 && n != idx {
			return 0, fmt.Sprintf("ports disagree on the GID index (%d, and %d on port %s)", idx, n, name)
		}
		idx = n
	}
	return idx, ""
}
