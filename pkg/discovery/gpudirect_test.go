package discovery_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// modules writes module directories below root: name to taint, where a taint of "-"
// leaves the taint file out.
func modules(t *testing.T, root string, taints map[string]string) {
	t.Helper()
	for name, taint := range taints {
		dir := filepath.Join(root, "module", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if taint != "-" {
			writeFile(t, root, "module/"+name+"/taint", taint+"\n")
		}
	}
}

// TestGPUDirectRules discovers mixedNode under each state of the NVIDIA driver: its mlx5
// ports (an InfiniBand PF, a hardware LAG, a VF) follow the rules, its mlx4 ports and its
// soft-RoCE device never have a way.
func TestGPUDirectRules(t *testing.T) {
	mlx5 := []string{"mlx5_0", "mlx5_bond_0", "mlx5_2"}
	never := []string{"mlx4_0", "rxe0"}
	tests := []struct {
		name     string
		modules  map[string]string
		wantMlx5 string
		wantWhy  string // of mlx5_0
	}{
		{name: "no NVIDIA driver", wantMlx5: "", wantWhy: "no NVIDIA driver loaded"},
		{name: "nvidia_peermem without the NVIDIA driver", modules: map[string]string{"nvidia_peermem": "O"}, wantMlx5: "", wantWhy: "no NVIDIA driver loaded"},
		{name: "proprietary modules alone", modules: map[string]string{"nvidia": "POE"}, wantMlx5: "", wantWhy: "proprietary NVIDIA kernel modules (taint POE)"},
		{name: "proprietary modules and nvidia_peermem", modules: map[string]string{"nvidia": "PO", "nvidia_peermem": "O"}, wantMlx5: GPUDirectPeermem, wantWhy: "peer memory"},
		{name: "open modules", modules: map[string]string{"nvidia": "OE"}, wantMlx5: GPUDirectDMABuf, wantWhy: "dma-buf"},
		{name: "open modules win over nvidia_peermem", modules: map[string]string{"nvidia": "O", "nvidia_peermem": "O"}, wantMlx5: GPUDirectDMABuf, wantWhy: "dma-buf"},
		{name: "open modules untainted", modules: map[string]string{"nvidia": ""}, wantMlx5: GPUDirectDMABuf, wantWhy: "dma-buf"},
		{name: "missing taint counts as proprietary", modules: map[string]string{"nvidia": "-", "nvidia_peermem": "O"}, wantMlx5: GPUDirectPeermem, wantWhy: "peer memory"},
		{name: "garbled taint counts as proprietary", modules: map[string]string{"nvidia": "open"}, wantMlx5: "", wantWhy: "taint cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeNode(t, mixedNode())
			modules(t, root, tt.modules)
			inv := discover(t, root)
			for _, p := range inv.Ports {
				want := tt.wantMlx5
				if strings.HasPrefix(p.IBDev, "mlx4") || p.Virtual {
					want = ""
				}
				if p.GPUDirect != want {
					t.Errorf("%s/%d: gpudirect %q, want %q", p.IBDev, p.Port, p.GPUDirect, want)
				}
			}
			f, err := sysfs.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := ReadGPUDriver(f)
			byName := map[string]*Port{}
			for i := range inv.Ports {
				byName[inv.Ports[i].IBDev] = &inv.Ports[i]
			}
			// The function doctor calls agrees with the inventory and says why.
			for _, name := range append(mlx5, never...) {
				mode, why := d.GPUDirect(byName[name])
				if mode != byName[name].GPUDirect || why == "" {
					t.Errorf("%s: GPUDirect() = %q, %q; inventory %q", name, mode, why, byName[name].GPUDirect)
				}
			}
			if _, why := d.GPUDirect(byName["mlx5_0"]); !strings.Contains(why, tt.wantWhy) {
				t.Errorf("mlx5_0: why %q, want it to contain %q", why, tt.wantWhy)
			}
		})
	}
}

func TestReadGPUDriver(t *testing.T) {
	tests := []struct {
		name    string
		modules map[string]string
		want    GPUDriver
		open    bool
		wantErr string
	}{
		{name: "nothing loaded", want: GPUDriver{}},
		{name: "proprietary", modules: map[string]string{"nvidia": "PO", "nvidia_peermem": "O"}, want: GPUDriver{Loaded: true, Taint: "PO", TaintKnown: true, Peermem: true}},
		{name: "open", modules: map[string]string{"nvidia": "O"}, want: GPUDriver{Loaded: true, Taint: "O", TaintKnown: true}, open: true},
		{name: "taint missing", modules: map[string]string{"nvidia": "-"}, want: GPUDriver{Loaded: true}, wantErr: "module/nvidia/taint"},
		{name: "taint garbled", modules: map[string]string{"nvidia": "p"}, want: GPUDriver{Loaded: true}, wantErr: "taint flags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			modules(t, root, tt.modules)
			f, err := sysfs.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadGPUDriver(f)
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ReadGPUDriver error = %v, want %q", err, tt.wantErr)
			}
			if got != tt.want || got.OpenModules() != tt.open {
				t.Errorf("ReadGPUDriver = %+v (open %v), want %+v (open %v)", got, got.OpenModules(), tt.want, tt.open)
			}
		})
	}
}

// TestGPUDirectUntrustedDriver: a port of a driver that is not known to register GPU
// memory gets no way even with both mechanisms loaded, and the reason names the driver.
func TestGPUDirectUntrustedDriver(t *testing.T) {
	d := GPUDriver{Loaded: true, TaintKnown: true, Taint: "O", Peermem: true}
	for _, drv := range []string{"bnxt_en", "ice", ""} {
		mode, why := d.GPUDirect(&Port{IBDev: "x", Port: 1, Driver: drv})
		if mode != "" || !strings.Contains(why, "is not known to register GPU memory") {
			t.Errorf("driver %q: %q, %q; want none, not known", drv, mode, why)
		}
	}
}
