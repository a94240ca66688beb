package netattach

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// FuzzDetachState feeds Detach States as a checkpoint might hold them after a crash,
// an upgrade or corruption: whatever the State says, Detach must not panic, and it must
// never touch a link that is not the attachment's (the host's primary interface and
// the bond stay as they are).
func FuzzDetachState(f *testing.F) {
	for _, tc := range attachCases() {
		st := State{Spec: tc.spec, Target: Target{PodUID: "p", NetnsPath: podPath}, Phase: PhaseAttached, TempName: "rdt00000000"}
		b, _ := json.Marshal(st)
		f.Add(b)
	}
	f.Add([]byte(`{"spec":{"mode":"move","hostNetdev":"eth0","podIfName":"eth0"},"target":{"netnsPath":"/pod"},"host":{"name":"eth0","hardwareAddr":"52:54:00:00:00:01","type":"device","mtu":1500}}`))
	f.Add([]byte(`{"spec":{"mode":"macvlan","podIfName":"bond0"},"tempName":"bond0","hardwareAddr":"5c:25:73:0a:00:00","target":{"netnsPath":"/host"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st State
		if json.Unmarshal(data, &st) != nil {
			return
		}
		_, ctx := ktesting.NewTestContext(t)
		fx := newFixture(t)
		fx.a.returnTimeout = time.Millisecond
		var j journal
		_ = fx.a.Detach(ctx, st, j.save)
		host := fx.w.dump("/host")
		for _, keep := range []string{
			"eth0 device mac=52:54:00:00:00:01 mtu=1500 up=true parent= master= pkey=0x0 addrs=[10.0.0.5/24]",
			"bond0 bond mac=5c:25:73:0a:00:00 mtu=9000 up=true",
		} {
			if !strings.Contains(host, keep) {
				t.Fatalf("Detach of %s changed a link that is not its own:\n%s", data, host)
			}
		}
	})
}
