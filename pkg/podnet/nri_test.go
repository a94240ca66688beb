package podnet

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
)

// TestNRIReconnectBackoff: the plugin reconnects to the runtime's NRI with growing
// delays while it cannot connect or is dropped right away, and starts over at the
// shortest delay after a connection that was up for a good while (the runtime
// restarted), instead of keeping the long delay of failures long past.
func TestNRIReconnectBackoff(t *testing.T) {
	tests := []struct {
		name string
		// ups are how long each connection stays up; 0 fails to connect.
		ups []time.Duration
		// want are the delays before each reconnect.
		want []time.Duration
	}{
		{
			name: "no runtime",
			ups:  []time.Duration{0, 0, 0, 0, 0, 0, 0},
			want: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second},
		},
		{
			name: "dropped right after each connect",
			ups:  []time.Duration{0, time.Second, time.Second, time.Second},
			want: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		},
		{
			name: "a healthy connection resets the backoff",
			ups:  []time.Duration{0, 0, 0, 0, time.Hour, 0, 0},
			want: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, time.Second, 2 * time.Second},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(klog.NewContext(t.Context(), klog.Background()))
				defer cancel()
				p := &Network{socket: "/run/nri/nri.sock"}
				var got []time.Duration
				var ended time.Time
				calls := 0
				serve := func(ctx context.Context, _ string) (time.Duration, error) {
					if calls == len(tc.ups) {
						cancel()
						return 0, ctx.Err()
					}
					if calls > 0 {
						got = append(got, time.Since(ended))
					}
					up := tc.ups[calls]
					calls++
					time.Sleep(up)
					ended = time.Now()
					if up == 0 {
						return 0, errors.New("no socket")
					}
					return up, errors.New("the runtime closed the NRI connection")
				}
				p.runNRI(ctx, "test", serve)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("delays before reconnecting (-want +got):\n%s", diff)
				}
			})
		})
	}
}
