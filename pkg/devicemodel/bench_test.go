package devicemodel

import (
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// BenchmarkBuild measures a rescan's model rebuild for a large node: 64 ports in the
// default model and 64 ports with 16 legacy shares each.
func BenchmarkBuild(b *testing.B) {
	inv := &discovery.Inventory{NetnsMode: discovery.NetnsModeShared, Ports: manyPorts(64)}
	for _, legacy := range []bool{false, true} {
		name := "default"
		if legacy {
			name = "legacy"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(inv, Options{NodeName: "bench", Legacy: legacy}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
