package nodeconfig

import (
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

func TestParseFabricReadiness(t *testing.T) {
	tests := []struct {
		name        string
		data        string
		wantTimeout time.Duration
		wantErr     []string
	}{
		{name: "absent: off, default timeout", data: "shares: 4", wantTimeout: 300 * time.Second},
		{name: "enabled with a timeout", data: "fabricReadiness: {enabled: true, timeoutSeconds: 60}", wantTimeout: time.Minute},
		{name: "selectors normalized like the top level", data: "fabricReadiness: {enabled: true, include: [{linkTypes: [IB], vendors: ['0x15B3']}]}", wantTimeout: 300 * time.Second},
		{name: "timeout negative", data: "fabricReadiness: {timeoutSeconds: -1}",
			wantErr: []string{"fabricReadiness.timeoutSeconds: Invalid value: -1: must be between 1 and 3600, or 0 for the default 300"}},
		{name: "timeout above the bound", data: "fabricReadiness: {timeoutSeconds: 3601}",
			wantErr: []string{"fabricReadiness.timeoutSeconds: Invalid value: 3601"}},
		{name: "bad selector named with its path", data: "fabricReadiness: {exclude: [{linkTypes: [ETHERNET]}]}",
			wantErr: []string{`fabricReadiness.exclude[0].linkTypes[0]: Unsupported value: "ETHERNET"`}},
		{name: "unknown field", data: "fabricReadiness: {enable: true}",
			wantErr: []string{`unknown field "fabricReadiness.enable"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := parseCase(t, tt.data, tt.wantErr)
			if !ok {
				return
			}
			if got := c.FabricReadiness.Timeout(); got != tt.wantTimeout {
				t.Errorf("Timeout() = %v, want %v", got, tt.wantTimeout)
			}
		})
	}
}

func TestFabricGates(t *testing.T) {
	ib := &discovery.Port{IBDev: "mlx5_0", Port: 1, LinkLayer: discovery.LinkLayerInfiniBand, VendorID: "15b3"}
	roce := &discovery.Port{IBDev: "mlx5_8", Port: 1, LinkLayer: discovery.LinkLayerEthernet, VendorID: "15b3", Netdev: "bond-storage"}
	tests := []struct {
		name     string
		data     string
		ib, roce bool
	}{
		{name: "not enabled", data: "fabricReadiness: {include: [{linkTypes: [IB]}]}"},
		{name: "enabled, every port", data: "fabricReadiness: {enabled: true}", ib: true, roce: true},
		{name: "InfiniBand only", data: "fabricReadiness: {enabled: true, include: [{linkTypes: [ib]}]}", ib: true},
		{name: "all but the storage bond", data: "fabricReadiness: {enabled: true, exclude: [{ifNames: ['bond-*']}]}", ib: true},
		{name: "vendor in another spelling", data: "fabricReadiness: {enabled: true, include: [{vendors: ['0x15B3']}]}", ib: true, roce: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.FabricReadiness.Gates(ib); got != tt.ib {
				t.Errorf("Gates(InfiniBand port) = %v, want %v", got, tt.ib)
			}
			if got := c.FabricReadiness.Gates(roce); got != tt.roce {
				t.Errorf("Gates(RoCE port) = %v, want %v", got, tt.roce)
			}
		})
	}
}
