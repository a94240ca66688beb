package portcounters

import (
	"fmt"
	"testing"
)

// largeNodePorts are the 64 physical ports of the large mock profile: mlx5_0..31
// InfiniBand, mlx5_32..63 RoCE.
func largeNodePorts() []Port {
	ports := make([]Port, 64)
	for i := range ports {
		ll := "InfiniBand"
		if i >= 32 {
			ll = "Ethernet"
		}
		ports[i] = Port{IBDev: fmt.Sprintf("mlx5_%d", i), Port: 1, LinkLayer: ll}
	}
	return ports
}

// BenchmarkRead is one read of every counter of a 64-port node (the large profile's
// physical ports): 21 counters/ files are there per port, of which the 8 named ones are
// read, and 19 (InfiniBand) or 29 (RoCE) hw_counters, every one read. This is the sysfs
// part of a scrape of the plugin's /metrics (BenchmarkPortCounterScrape in pkg/metrics
// adds the metrics); on a real node each counters/ read is a query of the adapter.
func BenchmarkRead(b *testing.B) {
	root := writeProfile(b, "large", nil)
	r := NewReader(root)
	r.Track(largeNodePorts())
	b.ReportAllocs()
	for b.Loop() {
		got := r.Read()
		if got.Errors != 0 || len(got.Ports) != 64 || len(got.Ports[63].HW) != 29 {
			b.Fatalf("read %d ports, %d errors, %d hw counters on a RoCE port", len(got.Ports), got.Errors, len(got.Ports[63].HW))
		}
	}
}

// BenchmarkReadLinkErrors is what a health poll adds on a 64-port node: link_downed and
// symbol_error of every port.
func BenchmarkReadLinkErrors(b *testing.B) {
	root := writeProfile(b, "large", nil)
	r := NewReader(root)
	r.Track(largeNodePorts())
	b.ReportAllocs()
	for b.Loop() {
		if got := r.ReadLinkErrors(); len(got) != 64 || !got[0].HasSymbolError {
			b.Fatalf("read %+v", got[0])
		}
	}
}
