package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// want is what a container must see for its claim.
type want struct {
	// ibdevs are the RDMA devices of the allocated ports (port 1 each), in claim order.
	ibdevs []string
	// gidIndex is NCCL_IB_GID_INDEX; "" means it must not be set.
	gidIndex string
}

// uverbs is the mock node's uverbs node of an RDMA device: mlx5_N has uverbsN, (231, 192+N).
func uverbs(ibdev string) (string, string) {
	var n int
	if _, err := fmt.Sscanf(ibdev, "mlx5_%d", &n); err != nil {
		panic(err)
	}
	return fmt.Sprintf("uverbs%d", n), fmt.Sprintf("c 231,%d", 192+n)
}

// assertSees checks the container's NCCL environment and its /dev/infiniband listing: the
// uverbs node of each allocated port with the right numbers, rdma_cm, and no other uverbs.
// The report was read from a running container, so a mismatch is the driver's fault.
func assertSees(t *testing.T, pod string, r framework.Report, w want) {
	t.Helper()
	var hca []string
	for _, d := range w.ibdevs {
		hca = append(hca, d+":1")
	}
	if got, exp := r.Env["NCCL_IB_HCA"], "="+strings.Join(hca, ","); got != exp {
		t.Errorf("%s: %s: NCCL_IB_HCA=%q, want %q\n%s", framework.DriverFault, pod, got, exp, r.Raw)
	}
	if got, ok := r.Env["NCCL_IB_GID_INDEX"]; w.gidIndex == "" && ok {
		t.Errorf("%s: %s: NCCL_IB_GID_INDEX=%q set on an InfiniBand claim", framework.DriverFault, pod, got)
	} else if w.gidIndex != "" && got != w.gidIndex {
		t.Errorf("%s: %s: NCCL_IB_GID_INDEX=%q, want %q", framework.DriverFault, pod, got, w.gidIndex)
	}
	wantDevs := map[string]string{"rdma_cm": "c 10,58"}
	for _, d := range w.ibdevs {
		name, num := uverbs(d)
		wantDevs[name] = num
	}
	for name, num := range wantDevs {
		if got := r.Devices[name]; got != num {
			t.Errorf("%s: %s: /dev/infiniband/%s = %q, want %q\n%s", framework.DriverFault, pod, name, got, num, r.Raw)
		}
	}
	for name := range r.Devices {
		if strings.HasPrefix(name, "uverbs") && wantDevs[name] == "" {
			t.Errorf("%s: %s: sees /dev/infiniband/%s, which its claim does not hold", framework.DriverFault, pod, name)
		}
	}
}

// assertAllocated checks the devices of the pod's claim in its allocation. The allocator
// picks from what the driver publishes, so a mismatch is the driver's fault (its devices,
// attributes or capacity).
func assertAllocated(t *testing.T, ns, pod string, devices ...string) {
	t.Helper()
	claim := env.PodClaim(t, ns, pod)
	got := framework.AllocatedDevices(claim)
	if strings.Join(got, " ") != strings.Join(devices, " ") {
		t.Errorf("%s: %s: claim %s allocated %v, want %v", framework.DriverFault, pod, claim.Name, got, devices)
	}
}
