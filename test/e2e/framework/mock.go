package framework

import (
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// CheckMockNode checks that the node publishes exactly the ports of the mock profile it
// is said to run (E2E_MOCK_PROFILE, its label, the local cluster's default): a wrong
// profile fails the suite's setup at once instead of every test that names a port.
func (e *Env) CheckMockNode(ctx context.Context) error {
	if e.MockProfile == "" {
		return nil
	}
	profile, err := mocknode.Lookup(e.MockProfile)
	if err != nil {
		return fmt.Errorf("mock profile of node %s: %w", e.Node, err)
	}
	published, err := e.nodeSlices(ctx)
	if err != nil {
		return err
	}
	got, want := publishedPorts(published), profilePorts(profile.Node().ExpectedPorts())
	if !slices.Equal(got, want) {
		return fmt.Errorf("node %s publishes the ports %v, but its mock profile %s has %v: set %s to the profile it runs, or to %s on RDMA hardware",
			e.Node, got, e.MockProfile, want, EnvMockProfile, noMock)
	}
	return nil
}

// publishedPorts are the ports ("mlx5_0/1") of the driver's devices in the slices, by
// their ibdev and port attributes, sorted, each once (a port is published as more than
// one device).
func publishedPorts(published []resourceapi.ResourceSlice) []string {
	var out []string
	for _, s := range published {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			ibdev, ok1 := devicemodel.LookupAttribute(DriverName, d, devicemodel.AttrIBDev)
			port, ok2 := devicemodel.LookupAttribute(DriverName, d, devicemodel.AttrPort)
			if !ok1 || !ok2 || ibdev.StringValue == nil || port.IntValue == nil {
				continue
			}
			out = append(out, fmt.Sprintf("%s/%d", *ibdev.StringValue, *port.IntValue))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// profilePorts are the ports of a mock profile as publishedPorts names them, sorted.
func profilePorts(ports []discovery.Port) []string {
	out := make([]string, 0, len(ports))
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s/%d", p.IBDev, p.Port))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
