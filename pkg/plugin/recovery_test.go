package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

// crash is the panic value of a simulated crash.
type crash string

// crashAt makes d panic right after step; run calls fn and reports whether it crashed.
func crashAt(d *Driver, step string) {
	d.step = func(name string) {
		if name == step {
			panic(crash(name))
		}
	}
}

func crashed(fn func()) (didCrash bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			didCrash = true
		}
	}()
	fn()
	return false
}

// TestCrashAtEveryStep kills the plugin after each step of prepare and of unprepare,
// starts a new one on the same directories and lets the kubelet retry: the answer must
// be the one an uninterrupted run gives, and nothing may be left once unprepared.
func TestCrashAtEveryStep(t *testing.T) {
	prepareSteps := []string{stepStartedSaved, stepSpecWritten, stepStatusQueued, stepCompletedSaved}
	unprepareSteps := []string{stepSpecRemoved, stepEntryRemoved}

	ref := newHarness(t, "dgx-h100")
	want := prepareOne(t, ref.driver(), ref.claim("c", exclusive(8)))

	for _, step := range prepareSteps {
		t.Run(step, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			c := h.claim("c", exclusive(8))
			d := h.driver()
			crashAt(d, step)
			if !crashed(func() { prepareOne(t, d, c) }) {
				t.Fatal("did not reach the step")
			}
			// The kubelet retries against a new process.
			got := prepareOne(t, h.driver(), c)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("answer after crash (-uninterrupted +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{cdi.SpecFileName(testDriver, string(c.UID))}, files(t, h.cdiDir)); diff != "" {
				t.Errorf("CDI dir (-want +got):\n%s", diff)
			}
			unprepareOne(t, h.driver(), c)
			assertClean(t, h)
		})
		t.Run(step+", then unprepare instead of retry", func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			c := h.claim("c", exclusive(8))
			d := h.driver()
			crashAt(d, step)
			crashed(func() { prepareOne(t, d, c) })
			// The pod was deleted meanwhile: the kubelet unprepares instead.
			unprepareOne(t, h.driver(), c)
			assertClean(t, h)
		})
	}
	for _, step := range unprepareSteps {
		t.Run(step, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			c := h.claim("c", exclusive(8))
			prepareOne(t, h.driver(), c)
			d := h.driver()
			crashAt(d, step)
			if !crashed(func() { unprepareOne(t, d, c) }) {
				t.Fatal("did not reach the step")
			}
			unprepareOne(t, h.driver(), c)
			assertClean(t, h)
		})
	}
}

// assertClean checks that no CDI spec, checkpoint entry or temporary file is left.
func assertClean(t *testing.T, h *harness) {
	t.Helper()
	if got := files(t, h.cdiDir); len(got) != 0 {
		t.Errorf("CDI files left: %v", got)
	}
	if got := h.checkpointClaims(); len(got) != 0 {
		t.Errorf("checkpoint entries left: %v", got)
	}
	for _, f := range files(t, h.dataDir) {
		if strings.HasSuffix(f, ".tmp") {
			t.Errorf("temporary file left: %s", f)
		}
	}
}

func TestCorruptedCheckpointIsMovedAside(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	c := h.claim("c", exclusive(1))
	prepareOne(t, h.driver(), c)
	cpPath := filepath.Join(h.dataDir, checkpoint.FileName)
	if err := os.WriteFile(cpPath, []byte(`{"version":1,"claims":{"x"`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := h.driver()
	var aside []string
	for _, f := range files(t, h.dataDir) {
		if strings.HasPrefix(f, checkpoint.FileName+".corrupt-") {
			aside = append(aside, f)
		}
	}
	if len(aside) != 1 {
		t.Fatalf("corrupted checkpoint not moved aside: %v", files(t, h.dataDir))
	}
	if got := h.checkpointClaims(); len(got) != 0 {
		t.Errorf("new checkpoint not empty: %v", got)
	}
	// The running pod's spec stays until the claim is gone; unprepare finds it by UID.
	if len(files(t, h.cdiDir)) != 1 {
		t.Fatalf("CDI spec of the running claim was touched: %v", files(t, h.cdiDir))
	}
	// The cleanup adopts it back, so that overlap checks see it again.
	if err := d.Cleanup(h.ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.checkpointClaims(); got[string(c.UID)] != checkpoint.PhasePrepareStarted {
		t.Errorf("claim not adopted: %v", got)
	}
	if res := prepareOne(t, d, h.claim("other", exclusive(1))); res.Err == nil {
		t.Error("adopted claim's device was given to another claim")
	}
	unprepareOne(t, d, c)
	assertClean(t, h)
}

func TestFutureCheckpointRefusesToStart(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	cpPath := filepath.Join(h.dataDir, checkpoint.FileName)
	content := `{"version":7,"bootID":"boot-1","claims":{}}`
	if err := os.WriteFile(cpPath, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := h.newDriver()
	if !errors.Is(err, checkpoint.ErrFutureVersion) || !strings.Contains(err.Error(), cpPath) {
		t.Fatalf("error %v, want ErrFutureVersion naming %s", err, cpPath)
	}
	if data, _ := os.ReadFile(cpPath); string(data) != content {
		t.Error("newer checkpoint was changed")
	}
}

func TestRebootDropsEntriesAndSpecs(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	c := h.claim("c", exclusive(2))
	prepareOne(t, h.driver(), c)
	h.setBootID("boot-2")
	d := h.driver()
	assertClean(t, h)
	// Devices are free again.
	if res := prepareOne(t, d, h.claim("after", exclusive(2))); res.Err != nil {
		t.Errorf("prepare after reboot: %v", res.Err)
	}
}

func TestDroppedFieldsSwitchesToLegacy(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	var fatal error
	d.fatal = func(err error) { fatal = err }
	if len(h.sink.published) != 1 {
		t.Fatalf("published %d times at start", len(h.sink.published))
	}
	partitionable := h.sink.published[0].Pools[testPool].Slices[0]
	if len(partitionable.SharedCounters) == 0 {
		t.Fatal("first publish is not the partitionable model")
	}

	// Claims prepared before the switch stay prepared and unprepare later.
	before := h.claim("before", []alloc{{request: "r", device: "mlx5-0-p1"}})
	prepareOne(t, d, before)

	// The API server dropped the counters: what the controller then reports.
	desired := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: partitionable.Devices, SharedCounters: partitionable.SharedCounters}}
	actual := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: partitionable.Devices}}
	dropped := &resourceslice.DroppedFieldsError{PoolName: testPool, DesiredSlice: desired, ActualSlice: actual}
	d.HandleError(h.ctx, fmt.Errorf("recoverable: %w", wrapRecoverable(dropped)), "publish")
	d.HandleError(h.ctx, fmt.Errorf("recoverable: %w", wrapRecoverable(dropped)), "publish again")
	if !h.pub.Legacy() {
		t.Fatal("node did not switch to legacy")
	}
	if fatal != nil {
		t.Fatalf("dropped fields stopped the plugin: %v", fatal)
	}
	// The publisher's loop republishes on the fallback signal.
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	never := manualTrigger{ch: make(chan health.Signal)}
	go h.pub.Run(ctx, never)
	testwait.For(t, "legacy model republished", func() bool { return len(h.publishedSnapshot()) >= 2 })
	cancel()
	legacy := h.publishedSnapshot()[1].Pools[testPool].Slices[0]
	if len(legacy.SharedCounters) != 0 || !strings.HasSuffix(legacy.Devices[0].Name, "-s0") {
		t.Errorf("second publish is not the legacy model: %d counter sets, first device %s", len(legacy.SharedCounters), legacy.Devices[0].Name)
	}
	// A legacy share prepares, and the claim of the old model unprepares.
	if res := prepareOne(t, d, h.claim("after", []alloc{{request: "r", device: "mlx5-1-p1-s0"}})); res.Err != nil {
		t.Errorf("prepare of a legacy device: %v", res.Err)
	}
	unprepareOne(t, d, before)

	// A fatal error stops the plugin.
	d.HandleError(h.ctx, errors.New("listener gone"), "DRA gRPC server failed")
	if fatal == nil || !strings.Contains(fatal.Error(), "listener gone") {
		t.Errorf("fatal error not passed on: %v", fatal)
	}
}

// wrapRecoverable marks err the way the helper marks publishing errors.
func wrapRecoverable(err error) error {
	return recoverable{err}
}

type recoverable struct{ error }

func (r recoverable) Is(target error) bool { return target == kubeletplugin.ErrRecoverable }
func (r recoverable) Unwrap() error        { return r.error }

type manualTrigger struct{ ch chan health.Signal }

func (m manualTrigger) C() <-chan health.Signal { return m.ch }

func (h *harness) publishedSnapshot() []resourceslice.DriverResources {
	return h.sink.snapshot()
}

func TestCleanupRemovesOrphansOnly(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	live := h.claim("live", exclusive(1))
	gone := h.claim("gone", []alloc{{request: "r", device: "mlx5-1-p1"}})
	replaced := h.claim("replaced", []alloc{{request: "r", device: "mlx5-2-p1"}})
	for _, c := range []*resourceapi.ResourceClaim{live, gone, replaced} {
		if res := prepareOne(t, d, c); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	// Claim status is written in the background. Let it finish before the claims are
	// deleted: the fake clientset's apply would create a deleted claim anew, which a real
	// API server does not do for the status subresource.
	if err := d.status.WaitIdle(h.ctx); err != nil {
		t.Fatal(err)
	}
	// A spec with neither entry nor claim, as after a lost checkpoint.
	specs := cdi.NewWriter(cdi.Options{SpecDir: h.cdiDir, Exists: func(string) bool { return true }})
	lost := uidFor("lost")
	port := h.mustLookup("mlx5-3-p1").Port
	if _, err := specs.Write(h.ctx, string(lost), []cdi.ClaimDevice{{Request: "r", Device: "mlx5-3-p1", Port: port}}); err != nil {
		t.Fatal(err)
	}
	kube := h.kube.ResourceV1().ResourceClaims("ns")
	if err := kube.Delete(h.ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.Delete(h.ctx, "replaced", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := replaced.DeepCopy()
	again.UID, again.ResourceVersion = uidFor("replaced-2"), ""
	if _, err := kube.Create(h.ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// With a grace period nothing goes at first sight.
	d.cleanupGrace = time.Hour
	if err := d.Cleanup(h.ctx); err != nil {
		t.Fatal(err)
	}
	if len(files(t, h.cdiDir)) != 4 || len(h.checkpointClaims()) != 3 {
		t.Fatalf("removed within the grace period: specs %v, entries %v", files(t, h.cdiDir), h.checkpointClaims())
	}
	h.clock.Step(2 * time.Hour)
	// The spec without entry was first seen orphaned by the run above.
	if err := d.Cleanup(h.ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{cdi.SpecFileName(testDriver, string(live.UID))}, files(t, h.cdiDir)); diff != "" {
		t.Errorf("CDI specs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]checkpoint.Phase{string(live.UID): checkpoint.PhasePrepareCompleted}, h.checkpointClaims()); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func (h *harness) mustLookup(name string) devicemodel.Device {
	d, ok := h.pub.Lookup(testPool, name)
	if !ok {
		h.t.Fatalf("no device %s", name)
	}
	return d
}

func TestInstallHook(t *testing.T) {
	src := filepath.Join(t.TempDir(), cdi.HookBinary)
	if err := os.WriteFile(src, []byte("#!/bin/true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "host", "bin")
	for range 2 {
		path, err := InstallHook(context.Background(), src, dir, cdi.HookBinary)
		if err != nil {
			t.Fatal(err)
		}
		if path != filepath.Join(dir, cdi.HookBinary) {
			t.Errorf("installed to %s", path)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("installed hook: %v, mode %v", err, st.Mode())
		}
		if got := files(t, dir); len(got) != 1 {
			t.Errorf("install dir holds %v", got)
		}
	}
	if _, err := InstallHook(context.Background(), filepath.Join(t.TempDir(), "missing"), dir, cdi.HookBinary); err == nil {
		t.Error("missing source accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{NodeName: "n", DriverName: "rdma.dra.io", RescanInterval: time.Second, CleanupInterval: time.Minute, Model: publish.ModelAuto, HealthcheckPort: -1,
		HealthPollInterval: time.Second, TaintEffect: resourceapi.DeviceTaintEffectNoSchedule, MaxRepublishPerMinute: 20,
		KubeClient: cliflags.KubeClient{QPS: DefaultKubeAPIQPS, Burst: DefaultKubeAPIBurst}, StatusAPIQPS: DefaultStatusAPIQPS, StatusAPIBurst: DefaultStatusAPIBurst}
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{name: "valid", change: func(*Config) {}},
		{name: "no node", change: func(c *Config) { c.NodeName = "" }, want: "--node-name (NODE_NAME) is required"},
		{name: "bad model", change: func(c *Config) { c.Model = "fancy" }, want: `unknown device model "fancy", want auto, partitionable or legacy`},
		{name: "netlink off", change: func(c *Config) { c.Netlink = "false" }},
		{name: "bad netlink", change: func(c *Config) { c.Netlink = "yes" }, want: `--netlink must be auto, true or false, got "yes"`},
		{name: "zero rescan", change: func(c *Config) { c.RescanInterval = 0 }, want: "--rescan-interval must be positive, got 0s"},
		{name: "zero poll", change: func(c *Config) { c.HealthPollInterval = 0 }, want: "--health-poll-interval must be positive, got 0s"},
		{name: "NoExecute", change: func(c *Config) { c.TaintEffect = resourceapi.DeviceTaintEffectNoExecute }},
		{name: "bad taint effect", change: func(c *Config) { c.TaintEffect = "PreferNoSchedule" }, want: `--taint-effect: unknown taint effect "PreferNoSchedule", want NoSchedule, NoExecute or None`},
		{name: "no damping", change: func(c *Config) { c.MaxRepublishPerMinute = 0 }},
		{name: "zero QPS", change: func(c *Config) { c.KubeClient.QPS = 0 }, want: "--kube-api-qps must be positive, got 0"},
		{name: "fractional QPS", change: func(c *Config) { c.KubeClient.QPS = 0.5 }},
		{name: "zero burst", change: func(c *Config) { c.KubeClient.Burst = 0 }, want: "--kube-api-burst must be at least 1, got 0"},
		{name: "zero status QPS", change: func(c *Config) { c.StatusAPIQPS = 0 }, want: "--status-api-qps must be positive, got 0"},
		{name: "zero status burst", change: func(c *Config) { c.StatusAPIBurst = 0 }, want: "--status-api-burst must be at least 1, got 0"},
		{name: "damping of one", change: func(c *Config) { c.MaxRepublishPerMinute = 1 }, want: "--max-republish-per-minute: max republishes per minute must be 0 (no damping) or at least 2, got 1"},
		{name: "secure metrics", change: func(c *Config) { c.MetricsAuth.Secure = true }},
		{name: "metrics cert without key", change: func(c *Config) { c.MetricsAuth.Secure, c.MetricsAuth.CertFile = true, "/tls/tls.crt" },
			want: "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{name: "metadata root", change: func(c *Config) {
			c.PluginsDir, c.DeviceMetadataRoot = "/var/lib/kubelet/plugins", DefaultDeviceMetadataRoot
		}},
		{name: "metadata root next to the data directory", change: func(c *Config) { c.PluginsDir, c.DeviceMetadataRoot = "/k/plugins", "/k/plugins/rdma.dra.io-metadata" }},
		{name: "relative metadata root", change: func(c *Config) { c.DeviceMetadataRoot = "run/metadata" },
			want: `--device-metadata-root must be an absolute path, got "run/metadata"`},
		{name: "metadata root in the data directory", change: func(c *Config) { c.PluginsDir, c.DeviceMetadataRoot = "/k/plugins", "/k/plugins/rdma.dra.io/m" },
			want: `--device-metadata-root "/k/plugins/rdma.dra.io/m": its directory /k/plugins/rdma.dra.io/m/rdma.dra.io and the data directory /k/plugins/rdma.dra.io must not contain each other`},
		{name: "metadata root is the plugins directory", change: func(c *Config) { c.PluginsDir, c.DeviceMetadataRoot = "/k/plugins", "/k/plugins" },
			want: `--device-metadata-root "/k/plugins": its directory /k/plugins/rdma.dra.io and the data directory /k/plugins/rdma.dra.io must not contain each other`},
		{name: "metadata directory around the data directory", change: func(c *Config) { c.PluginsDir, c.DeviceMetadataRoot = "/r/rdma.dra.io/plugins", "/r" },
			want: `--device-metadata-root "/r": its directory /r/rdma.dra.io and the data directory /r/rdma.dra.io/plugins/rdma.dra.io must not contain each other`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.change(&c)
			err := c.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	if got := good.DataDir(); got != "rdma.dra.io" {
		t.Errorf("data dir %q", got)
	}
}
