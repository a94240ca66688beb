package cdi

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden and the fabric table of docs/claim-config.md from the current output")

// TestGolden writes each case's spec and compares the file byte for byte with
// testdata/<case>.golden. Run `go test ./pkg/cdi -update` after an intended change and
// read the diff.
func TestGolden(t *testing.T) {
	for _, tc := range specCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			dir := t.TempDir()
			w := NewWriter(Options{SpecDir: dir, HookPath: testHookPath, Exists: tc.exists})
			ids, err := w.Write(ctx, testClaimUID, tc.devices)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, SpecFileName("", testClaimUID)))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("spec differs from %s (-want +got):\n%s", golden, diff)
			}
			checkIDs(t, tc, ids)
		})
	}
}

// checkIDs checks that every device gets its own ID, and only that.
func checkIDs(t *testing.T, tc specCase, ids [][]string) {
	t.Helper()
	if len(ids) != len(tc.devices) {
		t.Fatalf("got %d ID lists for %d devices", len(ids), len(tc.devices))
	}
	for i, d := range tc.devices {
		want := []string{"k8s.rdma.dra.io/hca=" + testClaimUID + "-" + d.Device}
		if d.ShareID != "" {
			want[0] += "-" + d.ShareID
		}
		if diff := cmp.Diff(want, ids[i]); diff != "" {
			t.Errorf("IDs of device %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestBuildSpecErrors(t *testing.T) {
	good := exclusive("nic", ib("mlx5_0", 1, 0, 0), cfg(nil))
	tests := []struct {
		name     string
		uid      string
		devices  []ClaimDevice
		hookPath string
		want     string
	}{
		{name: "uid with a slash", uid: "../../etc/x", devices: []ClaimDevice{good},
			want: `claim UID "../../etc/x" is not a UUID`},
		{name: "empty uid", uid: "", devices: []ClaimDevice{good}, want: `claim UID "" is not a UUID`},
		{name: "no devices", uid: testClaimUID, want: "claim has no devices"},
		{name: "device listed twice", uid: testClaimUID, devices: []ClaimDevice{good, good},
			want: `device "mlx5-0-p1" of request "nic" is listed twice`},
		{name: "bad device name", uid: testClaimUID, devices: []ClaimDevice{func() ClaimDevice { d := good; d.Device = "Mlx5/0"; return d }()},
			want: `device 0 (request "nic"): device name "Mlx5/0": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{name: "bad share ID", uid: testClaimUID, devices: []ClaimDevice{shared("nic", "1/2", ib("mlx5_0", 1, 0, 0), cfg(nil))},
			want: `device 0 (request "nic"): share ID "1/2" is not a UUID`},
		{name: "port without uverbs", uid: testClaimUID, devices: []ClaimDevice{func() ClaimDevice { d := good; d.Port.Verbs = nil; return d }()},
			want: `device "mlx5-0-p1" of request "nic": port mlx5_0/1 has no uverbs device`},
		{name: "odd char device name", uid: testClaimUID, devices: []ClaimDevice{func() ClaimDevice {
			d := good
			d.Port.UMAD = &discovery.CharDev{Name: "../umad0", Major: 231}
			return d
		}()}, want: `device "mlx5-0-p1" of request "nic": umad device name "../umad0" is not umadN`},
		{name: "invalid config", uid: testClaimUID, devices: []ClaimDevice{func() ClaimDevice { d := good; d.Config.GIDIndex = ptr.To(v1alpha1.GIDIndexPolicy("300")); return d }()},
			want: `config of request "nic": gidIndex: Invalid value: "300": must be auto, none or a number from 0 to 255`},
		{name: "memlock without hook", uid: testClaimUID, devices: []ClaimDevice{func() ClaimDevice { d := good; d.Config.Memlock = ptr.To(v1alpha1.MemlockUnlimited); return d }()},
			want: "claim asks for a memlock limit, but no hook path is configured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			_, _, err := BuildSpec(ctx, tc.uid, tc.devices, Options{HookPath: tc.hookPath, Exists: func(string) bool { return true }})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error:\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestMemlockLimit(t *testing.T) {
	c := func(p v1alpha1.MemlockPolicy) *v1alpha1.RdmaConfig {
		r := cfg(func(r *v1alpha1.RdmaConfig) { r.Memlock = ptr.To(p) })
		return &r
	}
	tests := []struct {
		name    string
		configs []*v1alpha1.RdmaConfig
		want    string
		asked   bool
	}{
		{"none asks", []*v1alpha1.RdmaConfig{c("unset"), c("unset")}, "", false},
		{"largest wins", []*v1alpha1.RdmaConfig{c("2Gi"), c("unset"), c("1Gi")}, "2147483648", true},
		{"unlimited wins", []*v1alpha1.RdmaConfig{c("64Gi"), c("unlimited"), c("1Gi")}, "unlimited", true},
		{"decimal quantity", []*v1alpha1.RdmaConfig{c("1G")}, "1000000000", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, asked := memlockLimit(tc.configs)
			if got != tc.want || asked != tc.asked {
				t.Errorf("got %q, %v; want %q, %v", got, asked, tc.want, tc.asked)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	off := cfg(func(c *v1alpha1.RdmaConfig) { c.NCCLEnv = ptr.To(false) })
	none := cfg(func(c *v1alpha1.RdmaConfig) { c.GIDIndex = ptr.To(v1alpha1.GIDIndexNone) })
	fixed := func(n string) v1alpha1.RdmaConfig {
		return cfg(func(c *v1alpha1.RdmaConfig) { c.GIDIndex = ptr.To(v1alpha1.GIDIndexPolicy(n)) })
	}
	def := cfg(nil)
	tests := []struct {
		name    string
		devices []ClaimDevice
		want    []string
	}{
		{"all off", []ClaimDevice{exclusive("a", ib("mlx5_0", 1, 0, 0), off)}, nil},
		{"off request is left out", []ClaimDevice{
			exclusive("sm", ib("mlx5_9", 1, 9, 9), off),
			exclusive("nic", roce("mlx5_4", 1, 4, 4, ptr.To(3)), def),
		}, []string{"NCCL_IB_HCA==mlx5_4:1", "NCCL_IB_GID_INDEX=3", "UCX_NET_DEVICES=mlx5_4:1", "RDMA_DEVICES=mlx5_4"}},
		{"two shares of one port are listed once", []ClaimDevice{
			shared("a", testShareID, roce("mlx5_4", 1, 4, 4, ptr.To(3)), def),
			shared("b", "00000000-0000-0000-0000-000000000001", roce("mlx5_4", 1, 4, 4, ptr.To(3)), def),
		}, []string{"NCCL_IB_HCA==mlx5_4:1", "NCCL_IB_GID_INDEX=3", "UCX_NET_DEVICES=mlx5_4:1", "RDMA_DEVICES=mlx5_4"}},
		{"none on one port", []ClaimDevice{
			exclusive("a", roce("mlx5_4", 1, 4, 4, ptr.To(3)), def),
			exclusive("b", roce("mlx5_5", 1, 5, 5, ptr.To(3)), none),
		}, []string{"NCCL_IB_HCA==mlx5_4:1,mlx5_5:1", "UCX_NET_DEVICES=mlx5_4:1,mlx5_5:1", "RDMA_DEVICES=mlx5_4,mlx5_5"}},
		{"auto without a usable GID", []ClaimDevice{exclusive("a", roce("rxe0", 1, 0, -1, nil), def)},
			[]string{"NCCL_IB_HCA==rxe0:1", "UCX_NET_DEVICES=rxe0:1", "RDMA_DEVICES=rxe0"}},
		{"number agrees with auto", []ClaimDevice{
			exclusive("a", roce("mlx5_4", 1, 4, 4, ptr.To(3)), def),
			exclusive("b", roce("mlx5_5", 1, 5, 5, nil), fixed("3")),
		}, []string{"NCCL_IB_HCA==mlx5_4:1,mlx5_5:1", "NCCL_IB_GID_INDEX=3", "UCX_NET_DEVICES=mlx5_4:1,mlx5_5:1", "RDMA_DEVICES=mlx5_4,mlx5_5"}},
		{"number is never given to InfiniBand", []ClaimDevice{exclusive("a", ib("mlx5_0", 1, 0, 0), fixed("0"))},
			[]string{"NCCL_IB_HCA==mlx5_0:1", "UCX_NET_DEVICES=mlx5_0:1", "RDMA_DEVICES=mlx5_0"}},
		{"unknown link layer", []ClaimDevice{exclusive("a", port("x_0", 1, 0, 0, discovery.LinkLayerUnknown, ptr.To(1)), def)},
			[]string{"NCCL_IB_HCA==x_0:1", "UCX_NET_DEVICES=x_0:1", "RDMA_DEVICES=x_0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			configs := make([]*v1alpha1.RdmaConfig, len(tc.devices))
			for i := range tc.devices {
				configs[i] = &tc.devices[i].Config
			}
			got, err := envFor(ctx, tc.devices, configs, noTables{t})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestGoldenFilesAreUsed fails when a golden file no longer belongs to a case, so that
// renamed cases do not leave stale files behind.
func TestGoldenFilesAreUsed(t *testing.T) {
	names := map[string]bool{}
	for _, tc := range specCases() {
		names[tc.name+".golden"] = true
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !names[filepath.Base(f)] {
			t.Errorf("%s belongs to no case", f)
		}
	}
	if len(files) != len(names) {
		t.Errorf("%d golden files for %d cases (run with -update)", len(files), len(names))
	}
}

// BenchmarkWrite8Ports measures preparing the CDI spec of a claim of eight ports, the
// common training node.
func BenchmarkWrite8Ports(b *testing.B) {
	var tc specCase
	for _, c := range specCases() {
		if c.name == "eight-ib-ports" {
			tc = c
		}
	}
	ctx := b.Context()
	b.Run("build", func(b *testing.B) {
		opts := Options{Exists: tc.exists}
		for b.Loop() {
			if _, _, err := BuildSpec(ctx, testClaimUID, tc.devices, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write", func(b *testing.B) {
		w := NewWriter(Options{SpecDir: b.TempDir(), Exists: tc.exists})
		for b.Loop() {
			// Remove first, so that every round writes instead of finding the file current.
			if err := w.Remove(ctx, testClaimUID); err != nil {
				b.Fatal(err)
			}
			if _, err := w.Write(ctx, testClaimUID, tc.devices); err != nil {
				b.Fatal(err)
			}
		}
	})
}
