package podnet

import (
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

func TestDefaultInterfaceNames(t *testing.T) {
	tests := []struct {
		name, driver string
		k            int
		want         string
	}{
		{name: "the standard installation keeps rdma<k>", driver: devicemodel.DefaultDriverName, want: "rdma0"},
		{name: "the standard installation, second device", driver: devicemodel.DefaultDriverName, k: 1, want: "rdma1"},
		{name: "an empty driver name is the standard one", driver: "", k: 2, want: "rdma2"},
		// The names below are pinned: they must not change across versions, nodes and
		// pods (docs/network-attachment.md gives the first one as the example).
		{name: "another installation", driver: "rdma-b.example.com", want: "rdmab3a40db-0"},
		{name: "a first label of digits", driver: "42.example.com", k: 3, want: "42992220-3"},
		{name: "a long first label", driver: "a-very-long-driver-name-for-rdma.example.com", k: 12, want: "averye70837-12"},
		{name: "the label gives way to a long index", driver: "a-very-long-driver-name-for-rdma.example.com", k: 123456, want: "ave70837-123456"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := defaultPodIfName(tc.driver, tc.k)
			if got != tc.want {
				t.Errorf("defaultPodIfName(%q, %d) = %q, want %q", tc.driver, tc.k, got, tc.want)
			}
			spec := netattach.Spec{Mode: netattach.ModeMacvlan, HostNetdev: "eth1", PodIfName: got}
			if err := spec.Validate(); err != nil {
				t.Errorf("%q is not a valid pod interface name: %v", got, err)
			}
		})
	}
	if a, b := defaultPodIfName("rdma.example.com", 0), defaultPodIfName("rdma.example.org", 0); a == b || a == "rdma0" || b == "rdma0" {
		t.Errorf("two installations whose names share the first label: %q and %q, want two names other than rdma0", a, b)
	}
}
