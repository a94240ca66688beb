package health

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// TestMonitorFlapping follows a port through the flapping check on a mock node's files:
// its link_downed rises, the poll signals and the monitor reports the port flapping
// until the publisher has built slices with it; once quiet, the same the other way.
func TestMonitorFlapping(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	logger := klog.FromContext(ctx)
	n := newTestNode(t, "dgx-h100")
	c := testclock.NewFakeClock(epoch)
	rec := record.NewFakeRecorder(100)
	gauges := &fakeGauges{states: map[string]string{}}
	m, err := New(Options{SysfsRoot: n.root, Clock: c, Recorder: rec, NodeName: "node-1", Metrics: gauges,
		Counters: portcounters.NewReader(n.root),
		Flapping: FlapOptions{Window: time.Minute, Quiet: 30 * time.Second, LinkDowned: 1, SymbolErrors: 100}})
	if err != nil {
		t.Fatal(err)
	}
	inv := n.discover()
	publish := func(flapping map[devicemodel.PortID]string) {
		m.Observe(ctx, Scan{Inventory: inv, Changed: true, Models: models(t, inv), Flapping: flapping})
	}
	linkDowned := func(ibdev string) int {
		b, err := os.ReadFile(n.portFile(ibdev, 1, "counters/link_downed"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	mlx53 := devicemodel.PortID{IBDev: "mlx5_3", Port: 1}

	steps := []struct {
		name         string
		advance      time.Duration
		change       func()
		publish      bool // publish the slices with what the monitor says before the poll
		wantReason   string
		wantFlapping map[devicemodel.PortID]string
		wantEvents   []string
		wantGauge    bool // mlx5_3's port_flapping
	}{
		{name: "the first poll takes the baseline"},
		{
			name:         "link_downed rises: flapping, and the poll asks for a scan",
			advance:      time.Second,
			change:       func() { n.write("mlx5_3", 1, "counters/link_downed", strconv.Itoa(linkDowned("mlx5_3")+1)) },
			wantReason:   "mlx5_3 port 1 is flapping: link_downed rose by 1 within 1m0s",
			wantFlapping: map[devicemodel.PortID]string{mlx53: "LinkDowned"},
			wantEvents:   []string{"Warning RDMAPortFlapping mlx5_3 port 1 is flapping: link_downed rose by 1 within 1m0s"},
			wantGauge:    true,
		},
		{
			name:         "not published yet: every poll asks again",
			advance:      time.Second,
			wantReason:   "flapping ports differ from the published ones",
			wantFlapping: map[devicemodel.PortID]string{mlx53: "LinkDowned"},
			wantGauge:    true,
		},
		{
			name:         "published: nothing to do",
			advance:      time.Second,
			publish:      true,
			wantFlapping: map[devicemodel.PortID]string{mlx53: "LinkDowned"},
			wantGauge:    true,
		},
		{
			name:         "the last poll with the link down in the window",
			advance:      57 * time.Second, // 60s: the link down was at 1s
			wantFlapping: map[devicemodel.PortID]string{mlx53: "LinkDowned"},
			wantGauge:    true,
		},
		{
			name:         "the link down leaves the window: quiet from the last poll over the threshold",
			advance:      time.Second,
			wantFlapping: map[devicemodel.PortID]string{mlx53: "LinkDowned"},
			wantGauge:    true,
		},
		{
			name:         "quiet for 30 s: no longer flapping",
			advance:      29 * time.Second,
			wantReason:   "mlx5_3 port 1 stopped flapping: quiet for 30s",
			wantFlapping: map[devicemodel.PortID]string{},
			wantEvents:   []string{"Normal RDMAPortSteady mlx5_3 port 1 stopped flapping: quiet for 30s"},
		},
		{
			name:         "published without it",
			advance:      time.Second,
			publish:      true,
			wantFlapping: map[devicemodel.PortID]string{},
		},
	}
	publish(nil)
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			c.Step(s.advance)
			if s.change != nil {
				s.change()
			}
			if s.publish {
				publish(m.Flapping())
			}
			sig, err := m.poll(logger)
			if err != nil {
				t.Fatal(err)
			}
			reason := ""
			if sig != nil {
				reason = sig.Reason
			}
			if reason != s.wantReason {
				t.Errorf("poll signal %q, want %q", reason, s.wantReason)
			}
			if diff := cmp.Diff(s.wantFlapping, m.Flapping(), cmp.Comparer(func(a, b map[devicemodel.PortID]string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("Flapping() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(s.wantEvents, events(rec)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			gauges.mu.Lock()
			got, ok := gauges.flapping["mlx5_3/1"]
			others := gauges.flapping["mlx5_0/1"]
			gauges.mu.Unlock()
			if !ok || got != s.wantGauge || others {
				t.Errorf("port_flapping mlx5_3 %v (set %v), mlx5_0 %v; want %v, false", got, ok, others, s.wantGauge)
			}
		})
	}
}

// TestMonitorFlappingOff: without thresholds the monitor still tracks the ports for the
// counters' reader but never reads them on a poll.
func TestMonitorFlappingOff(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	n := newTestNode(t, "dgx-h100")
	reader := &countingReader{Reader: portcounters.NewReader(n.root)}
	m, err := New(Options{SysfsRoot: n.root, Clock: testclock.NewFakeClock(epoch), Counters: reader})
	if err != nil {
		t.Fatal(err)
	}
	inv := n.discover()
	m.Observe(ctx, Scan{Inventory: inv, Changed: true, Models: models(t, inv)})
	if _, err := m.poll(klog.FromContext(ctx)); err != nil {
		t.Fatal(err)
	}
	if got := len(reader.Ports()); got != 10 {
		t.Errorf("%d ports tracked, want the 10 published", got)
	}
	if reader.reads != 0 {
		t.Errorf("%d reads of link errors with the check off", reader.reads)
	}
}

type countingReader struct {
	*portcounters.Reader
	reads int
}

func (r *countingReader) ReadLinkErrors() []portcounters.LinkErrors {
	r.reads++
	return r.Reader.ReadLinkErrors()
}
