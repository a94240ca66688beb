package netattach

import (
	"slices"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// BenchmarkAttachDetachMacvlan measures one pod's macvlan attachment and its removal
// on the real kernel, in private namespaces (see real_test.go): create in the pod,
// rename, two addresses, a route, up, the (emulated) GID entries and lookup, then
// delete. The journal is a
// no-op, so the numbers are the kernel's and this package's share; the caller's
// checkpoint writes come on top. The goal is a p99 under 50 ms.
func BenchmarkAttachDetachMacvlan(b *testing.B) {
	for _, withGID := range []bool{true, false} {
		name := "emulated-gid"
		if !withGID {
			name = "netlink-only"
		}
		b.Run(name, func(b *testing.B) { benchMacvlan(b, withGID) })
	}
}

// benchMacvlan runs the benchmark with the emulated GID table, or without any RDMA
// kernel (the netlink steps alone, what a real node pays before its kernel's GID work).
func benchMacvlan(b *testing.B, withGID bool) {
	_, ctx := ktesting.NewTestContext(b)
	f := newRealFixture(b)
	spec := Spec{Mode: ModeMacvlan, HostNetdev: realPort, PodIfName: "net1", MTU: 1500, IBDevice: "mlx5_0",
		Addresses: prefixes("192.0.2.10/24", "2001:db8:1::10/64"), Routes: []Route{route("198.51.100.0/24", peerAddr)}}
	if !withGID {
		spec.IBDevice = ""
		f.a.kernel = nil
	}
	save := func(State) error { return nil }
	var total, attach []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		st, err := f.a.Attach(ctx, spec, f.target, save)
		if err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := f.a.Detach(ctx, st, save); err != nil {
			b.Fatal(err)
		}
		attach = append(attach, mid.Sub(start))
		total = append(total, time.Since(start))
	}
	b.StopTimer()
	report := func(d []time.Duration, name string) {
		slices.Sort(d)
		at := func(q float64) float64 {
			return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
		}
		b.ReportMetric(at(0.50), name+"-p50-ms")
		b.ReportMetric(at(0.99), name+"-p99-ms")
	}
	report(total, "attach+detach")
	report(attach, "attach")
}
