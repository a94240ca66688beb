package health

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// reading is one port's counters; a negative value is a file that could not be read.
func reading(ibdev string, linkDowned, symbolError int64) portcounters.LinkErrors {
	r := portcounters.LinkErrors{Port: portcounters.Port{IBDev: ibdev, Port: 1}}
	if linkDowned >= 0 {
		r.LinkDowned, r.HasLinkDowned = uint64(linkDowned), true
	}
	if symbolError >= 0 {
		r.SymbolError, r.HasSymbolError = uint64(symbolError), true
	}
	return r
}

func TestFlapDetector(t *testing.T) {
	opts := FlapOptions{Window: time.Minute, Quiet: 30 * time.Second, LinkDowned: 2, SymbolErrors: 100}
	type poll struct {
		at       time.Duration // since the epoch
		readings []portcounters.LinkErrors
		want     []FlapChange
	}
	a := func(ld, se int64) []portcounters.LinkErrors {
		return []portcounters.LinkErrors{reading("mlx5_0", ld, se)}
	}
	p0 := PortID{"mlx5_0", 1}
	tests := []struct {
		name string
		// opts replaces the thresholds above.
		opts  *FlapOptions
		polls []poll
	}{
		{
			name: "what a port counted before the first reading never counts",
			polls: []poll{
				{at: 0, readings: a(200, 60000)},
				{at: time.Second, readings: a(200, 60000)},
			},
		},
		{
			name: "two link downs within the window, then quiet",
			polls: []poll{
				{at: 0, readings: a(5, 0)},
				{at: 10 * time.Second, readings: a(6, 0)},
				{at: 20 * time.Second, readings: a(7, 0), want: []FlapChange{{Port: p0, Value: "LinkDowned", LinkDowned: 2}}},
				// The first link down leaves the window at 70s: under the threshold from then.
				{at: 69 * time.Second, readings: a(7, 0)},
				{at: 70 * time.Second, readings: a(7, 0)},
				// Quiet counts from the last reading over a threshold (69s).
				{at: 98 * time.Second, readings: a(7, 0)},
				{at: 99 * time.Second, readings: a(7, 0), want: []FlapChange{{Port: p0, Was: "LinkDowned"}}},
			},
		},
		{
			name: "link downs further apart than the window are no flapping",
			polls: []poll{
				{at: 0, readings: a(0, 0)},
				{at: 10 * time.Second, readings: a(1, 0)},
				{at: 71 * time.Second, readings: a(2, 0)},
			},
		},
		{
			name: "a link down while quiet starts the quiet window again",
			polls: []poll{
				{at: 0, readings: a(0, 0)},
				{at: time.Second, readings: a(2, 0), want: []FlapChange{{Port: p0, Value: "LinkDowned", LinkDowned: 2}}},
				{at: 60 * time.Second, readings: a(2, 0)},
				{at: 61 * time.Second, readings: a(2, 0)}, // under: quiet since the poll at 60s
				{at: 80 * time.Second, readings: a(4, 0)}, // over again before the quiet window ends
				{at: 90 * time.Second, readings: a(4, 0)}, // where it would have ended
				{at: 139 * time.Second, readings: a(4, 0)},
				{at: 140 * time.Second, readings: a(4, 0)}, // under: quiet since 139s
				{at: 168 * time.Second, readings: a(4, 0)},
				{at: 169 * time.Second, readings: a(4, 0), want: []FlapChange{{Port: p0, Was: "LinkDowned"}}},
			},
		},
		{
			name: "symbol errors over the threshold, link downs named first",
			polls: []poll{
				{at: 0, readings: a(0, 1000)},
				{at: 5 * time.Second, readings: a(0, 1050)},
				{at: 10 * time.Second, readings: a(0, 1100), want: []FlapChange{{Port: p0, Value: "SymbolErrors", SymbolErrors: 100}}},
				{at: 15 * time.Second, readings: a(2, 1100), want: []FlapChange{{Port: p0, Value: "LinkDowned", Was: "SymbolErrors", LinkDowned: 2, SymbolErrors: 100}}},
			},
		},
		{
			name: "a counter that went down was reset and counts from zero",
			opts: &FlapOptions{Window: time.Minute, Quiet: time.Second, LinkDowned: 3},
			polls: []poll{
				{at: 0, readings: a(40, 0)},
				{at: time.Second, readings: a(1, 0)},
				{at: 2 * time.Second, readings: a(3, 0), want: []FlapChange{{Port: p0, Value: "LinkDowned", LinkDowned: 3}}},
			},
		},
		{
			name: "a file that cannot be read keeps its baseline",
			opts: &FlapOptions{Window: time.Minute, Quiet: time.Second, LinkDowned: 2},
			polls: []poll{
				{at: 0, readings: a(1, 0)},
				{at: time.Second, readings: a(-1, 0)},
				{at: 2 * time.Second, readings: a(3, 0), want: []FlapChange{{Port: p0, Value: "LinkDowned", LinkDowned: 2}}},
			},
		},
		{
			name: "a port that is no longer published stops flapping",
			polls: []poll{
				{at: 0, readings: a(0, 0)},
				{at: time.Second, readings: a(9, 0), want: []FlapChange{{Port: p0, Value: "LinkDowned", LinkDowned: 9}}},
				{at: 2 * time.Second, want: []FlapChange{{Port: p0, Was: "LinkDowned", Gone: true}}},
				// Published again: a new baseline.
				{at: 3 * time.Second, readings: a(12, 0)},
			},
		},
		{
			name: "no thresholds: nothing flaps",
			opts: ptr.To(FlapOptionsFrom(nodeconfig.FlappingConfig{Disabled: true})),
			polls: []poll{
				{at: 0, readings: a(0, 0)},
				{at: time.Second, readings: a(255, 65535)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			if tt.opts != nil {
				o = *tt.opts
			}
			d := NewFlapDetector(o)
			for _, p := range tt.polls {
				got := d.Observe(epoch.Add(p.at), p.readings)
				if diff := cmp.Diff(p.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("poll at %v: changes (-want +got):\n%s", p.at, diff)
				}
				for _, c := range got {
					if v := d.Flapping()[c.Port]; v != c.Value {
						t.Errorf("poll at %v: Flapping()[%s] = %q, the change says %q", p.at, c.Port, v, c.Value)
					}
				}
			}
		})
	}
}

// TestFlapDetectorBoundsItsMemory: a port whose symbol errors rise on every poll keeps
// at most flapBuckets+1 entries, whatever the poll interval.
func TestFlapDetectorBoundsItsMemory(t *testing.T) {
	d := NewFlapDetector(FlapOptions{Window: time.Minute, Quiet: time.Minute, SymbolErrors: 1 << 40})
	for i := range 10 * 60 * 10 { // ten minutes of polls every 100 ms
		d.Observe(epoch.Add(time.Duration(i)*100*time.Millisecond), []portcounters.LinkErrors{reading("mlx5_0", 0, int64(i))})
	}
	st := d.ports[PortID{"mlx5_0", 1}]
	if n := len(st.events); n > flapBuckets+1 {
		t.Errorf("%d entries kept, want at most %d", n, flapBuckets+1)
	}
	var sum uint64
	for _, e := range st.events {
		sum += e.symbolErrors
	}
	if sum < 590 || sum > 600 {
		t.Errorf("the entries add up to %d symbol errors, want those of the last minute (about 600)", sum)
	}
}

func TestFlapChangeMessages(t *testing.T) {
	opts := FlapOptions{Window: 10 * time.Minute, Quiet: 5 * time.Minute}
	p := PortID{"mlx5_0", 1}
	for _, tt := range []struct {
		change FlapChange
		want   string
	}{
		{FlapChange{Port: p, Value: "LinkDowned", LinkDowned: 2}, "mlx5_0 port 1 is flapping: link_downed rose by 2 within 10m0s"},
		{FlapChange{Port: p, Value: "SymbolErrors", SymbolErrors: 300}, "mlx5_0 port 1 is flapping: symbol_error rose by 300 within 10m0s"},
		{FlapChange{Port: p, Was: "LinkDowned"}, "mlx5_0 port 1 stopped flapping: quiet for 5m0s"},
		{FlapChange{Port: p, Was: "LinkDowned", Gone: true}, "mlx5_0 port 1 stopped flapping: no longer published"},
	} {
		if got := tt.change.describe(opts); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.change, got, tt.want)
		}
	}
}

func TestFlapOptionsFrom(t *testing.T) {
	got := FlapOptionsFrom(nodeconfig.FlappingConfig{WindowSeconds: 30, LinkDowned: 1})
	want := FlapOptions{Window: 30 * time.Second, Quiet: 10 * time.Minute, LinkDowned: 1, SymbolErrors: 100}
	if got != want || !got.Enabled() {
		t.Errorf("FlapOptionsFrom = %+v, want %+v", got, want)
	}
	if off := FlapOptionsFrom(nodeconfig.FlappingConfig{Disabled: true, LinkDowned: 3}); off.Enabled() {
		t.Errorf("disabled check enabled: %+v", off)
	}
}
