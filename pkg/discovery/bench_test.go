package discovery

import (
	"context"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// BenchmarkDiscoverProfile is one full scan of a mock node as `rdma-dra mock-node
// --profile` writes it, a typical node (dgx-h100: 10 ports) and the large profile (64
// ports and 256 VFs): the read path of pkg/sysfs on disk (lstat, readlink, open and read
// of attribute files).
func BenchmarkDiscoverProfile(b *testing.B) {
	for _, tc := range []struct {
		profile string
		ports   int
	}{
		{profile: "dgx-h100", ports: 10},
		{profile: "large", ports: 64 + 256},
	} {
		b.Run(tc.profile, func(b *testing.B) {
			prof, err := mocknode.Lookup(tc.profile)
			if err != nil {
				b.Fatal(err)
			}
			root := writeNode(b, prof.Node())
			d := New(Options{SysfsRoot: root})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				inv, err := d.Discover(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(inv.Ports) != tc.ports {
					b.Fatalf("%d ports, want %d", len(inv.Ports), tc.ports)
				}
			}
		})
	}
}
