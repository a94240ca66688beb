package discovery_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// BenchmarkDiscoverProfile is one full scan of a mock node as `rdma-dra mock-node
// --profile` writes it, a typical node (dgx-h100: 10 ports) and the large profile (64
// ports and 256 VFs): the read path of pkg/sysfs on disk (lstat, readlink, open and read
// of attribute files). Besides wall time it reports the process's CPU time per scan
// (cpu-ns/op), which time spent waiting for a CPU on a shared machine does not inflate.
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
			cpu := cpuTime(b)
			for b.Loop() {
				inv, err := d.Discover(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(inv.Ports) != tc.ports {
					b.Fatalf("%d ports, want %d", len(inv.Ports), tc.ports)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the user and system CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
