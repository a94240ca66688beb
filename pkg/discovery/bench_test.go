package discovery_test

import (
	"context"
	"testing"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// BenchmarkDiscoverLarge is one full scan of the large profile (64 ports and 256 VFs).
func BenchmarkDiscoverLarge(b *testing.B) {
	prof, err := mocknode.Lookup("large")
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
		if len(inv.Ports) != 64+256 {
			b.Fatalf("%d ports", len(inv.Ports))
		}
	}
}
