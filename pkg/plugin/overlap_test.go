package plugin

import (
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// TestCheckOverlapSiblingPorts: the ports of a multi-port RDMA device (mlx4_0 ports 1
// and 2) share one uverbs node, so an exclusive device prepared for one claim keeps
// every device of both ports from other claims, and the other way round; shares of
// both ports go to different claims.
func TestCheckOverlapSiblingPorts(t *testing.T) {
	dev := func(name string, port int, exclusive bool) checkpoint.Device {
		d := checkpoint.Device{Request: "r", Pool: "n-rdma", Device: name, PortKey: devicemodel.DeviceName("mlx4_0", port),
			Exclusive: exclusive, IBDev: "mlx4_0", Port: port}
		if !exclusive {
			d.MaxShares = 16
		}
		return d
	}
	excl1, excl2 := dev("mlx4-0-p1", 1, true), dev("mlx4-0-p2", 2, true)
	shared1, shared2 := dev("mlx4-0-p1-shared", 1, false), dev("mlx4-0-p2-shared", 2, false)
	shared1.ShareID, shared2.ShareID = "a", "b"
	for _, tc := range []struct {
		name       string
		held, want checkpoint.Device
		wantErr    string // empty: no conflict
	}{
		{name: "exclusive port 2, port 1 held exclusively", held: excl1, want: excl2, wantErr: "every port of its RDMA device mlx4_0"},
		{name: "exclusive port 2, port 1 shared", held: shared1, want: excl2, wantErr: "every port of its RDMA device mlx4_0"},
		{name: "share of port 2, port 1 held exclusively", held: excl1, want: shared2, wantErr: "another port of RDMA device mlx4_0 is held exclusively"},
		{name: "shares of both ports", held: shared1, want: shared2},
		{name: "exclusive, same port as before", held: excl1, want: excl1, wantErr: "an exclusive device needs its port to itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := checkpoint.New("boot")
			cp.Claims["uid-held"] = &checkpoint.Claim{UID: "uid-held", Namespace: "ns", Name: "held",
				Phase: checkpoint.PhasePrepareCompleted, Devices: []checkpoint.Device{tc.held}}
			want := &checkpoint.Claim{UID: "uid-want", Namespace: "ns", Name: "want",
				Phase: checkpoint.PhasePrepareStarted, Devices: []checkpoint.Device{tc.want}}
			err := checkOverlap(cp, want)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
