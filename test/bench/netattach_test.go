package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
)

// TestSummarizeQuantiles checks the nearest-rank quantiles at the sample sizes of
// attach_detach_p99_ms (10 cycles in a smoke run, 200 in a full one): the p99 of 200
// samples is the 198th, so two outliers do not move it and three do.
func TestSummarizeQuantiles(t *testing.T) {
	sample := func(n int, outliers int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(n-i) * time.Millisecond // n..1, unsorted on purpose
		}
		for i := range outliers {
			out[i] = time.Second
		}
		return out
	}
	tests := []struct {
		name          string
		in            []time.Duration
		p50, p99, max float64
	}{
		{"10 cycles", sample(10, 0), 5, 10, 10},
		{"10 cycles, one outlier", sample(10, 1), 5, 1000, 1000},
		{"200 cycles", sample(200, 0), 100, 198, 200},
		{"200 cycles, two outliers", sample(200, 2), 100, 198, 1000},
		{"200 cycles, three outliers", sample(200, 3), 100, 1000, 1000},
		{"201 cycles", sample(201, 0), 101, 199, 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(tt.in)
			if s.N != len(tt.in) || s.P50 != tt.p50 || s.P99 != tt.p99 || s.Max != tt.max {
				t.Errorf("Summarize = %+v, want n=%d p50=%g p99=%g max=%g", s, len(tt.in), tt.p50, tt.p99, tt.max)
			}
		})
	}
}

// TestMeasureAttach runs a few cycles on the real kernel and checks the figures and
// that nothing is left behind: no link in this namespace, no network namespace held by
// this process, no mock tree.
func TestMeasureAttach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, veth and macvlan links")
	}
	treeBase := t.TempDir()
	linksBefore, nsBefore := ourLinks(t), netnsRefs(t)
	r := &Results{}
	if err := measureAttach(context.Background(), scale{attachCycles: 5, attachMaxTime: time.Minute}, treeBase, r); err != nil {
		t.Fatalf("measureAttach: %v", err)
	}
	a := r.Details.Attach
	if a == nil || a.NotMeasured != "" {
		t.Fatalf("not measured: %+v", a)
	}
	t.Logf("attach+detach over %d cycles: p50 %.3g ms, p99 %.3g ms (attach p50 %.3g ms, detach p50 %.3g ms)",
		a.Cycles, a.AttachDetach.P50, a.AttachDetach.P99, a.Attach.P50, a.Detach.P50)
	for key, v := range map[string]*float64{"attach_detach_p50_ms": r.AttachDetachP50MS, "attach_detach_p99_ms": r.AttachDetachP99MS} {
		if v == nil || *v <= 0 {
			t.Errorf("%s = %v, want a positive value", key, v)
		}
	}
	if r.AttachDetachP50MS != nil && r.AttachDetachP99MS != nil && *r.AttachDetachP50MS > *r.AttachDetachP99MS {
		t.Errorf("p50 %g > p99 %g", *r.AttachDetachP50MS, *r.AttachDetachP99MS)
	}
	if a.Cycles != 5 || a.AttachDetach.N != 5 || a.Attach.N != 5 || a.Detach.N != 5 {
		t.Errorf("cycles = %d, samples %d/%d/%d, want 5", a.Cycles, a.Attach.N, a.Detach.N, a.AttachDetach.N)
	}
	if a.GIDIndex <= 0 {
		t.Errorf("GID index %d, want the entry Attach found after the port's own", a.GIDIndex)
	}
	if slices.Contains(r.MissingKeys(), "attach_detach_p99_ms") || slices.Contains(r.MissingKeys(), "attach_detach_p50_ms") {
		t.Errorf("MissingKeys = %v after a measurement", r.MissingKeys())
	}

	if got := ourLinks(t); !slices.Equal(got, linksBefore) {
		t.Errorf("links of this namespace with the fixture's names: %v before, %v after", linksBefore, got)
	}
	entries, err := os.ReadDir(treeBase)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("left in the tree's base directory: %v", entries)
	}
	// The thread that created a namespace exits with its goroutine, shortly after.
	var got []string
	if !testwait.Poll(func() bool { got = netnsRefs(t); return slices.Equal(got, nsBefore) }) {
		t.Fatalf("network namespaces referenced by this process: %v before, %v after", nsBefore, got)
	}
}

// TestMeasureAttachNotRoot checks that without root the figures are recorded as not
// measured, with the reason, and that the report and MissingKeys say so.
func TestMeasureAttachNotRoot(t *testing.T) {
	defer func(f func() int) { euid = f }(euid)
	euid = func() int { return 1000 }
	r := sampleResults()
	r.AttachDetachP50MS, r.AttachDetachP99MS, r.Details.Attach = nil, nil, nil
	if err := measureAttach(context.Background(), scale{attachCycles: 5, attachMaxTime: time.Second}, t.TempDir(), r); err != nil {
		t.Fatalf("measureAttach: %v", err)
	}
	if r.AttachDetachP50MS != nil || r.AttachDetachP99MS != nil {
		t.Errorf("figures set without root: %v %v", r.AttachDetachP50MS, r.AttachDetachP99MS)
	}
	why := r.NotMeasured("attach_detach_p99_ms")
	if !strings.Contains(why, "root") {
		t.Errorf("NotMeasured = %q, want the reason", why)
	}
	if got, want := r.MissingKeys(), []string{"attach_detach_p99_ms", "attach_detach_p50_ms"}; !slices.Equal(got, want) {
		t.Errorf("MissingKeys = %v, want %v", got, want)
	}
	report := renderReport(r)
	if n := strings.Count(report, "not measured: "+why); n != 3 {
		t.Errorf("report says %q %d times, want 3 (the p99 in the goal table, the p50 in the context table, the section):\n%s", "not measured: "+why, n, report)
	}
}

// ourLinks lists the links of the test's own network namespace that have a name the
// fixture uses inside its private namespaces: none may leak out.
func ourLinks(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		switch n := l.Attrs().Name; {
		case n == attachPort, n == attachPeer, n == attachProbe, n == attachSpec().PodIfName, strings.HasPrefix(n, "rdt"):
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// netnsRefs lists the network namespaces this process holds, by its threads and its
// open descriptors, as "net:[inode]".
func netnsRefs(t *testing.T) []string {
	t.Helper()
	var out []string
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	fds, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(tasks, fds...) {
		if l, err := os.Readlink(p); err == nil && strings.HasPrefix(l, "net:[") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
