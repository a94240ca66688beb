package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// TestRunStops: run returns nil and looks at the DaemonSet (here gone, so it cleans the
// node up) only when ctx ends; a server that fails, or the driver's fatal error, stops it
// with that error and leaves the node as it is.
func TestRunStops(t *testing.T) {
	errFatal := errors.New("the API server dropped a field that matters")
	for _, tc := range []struct {
		name string
		// metrics is the metrics server's address; empty serves none.
		metrics string
		// stop ends the plugin: cancel ctx or report a fatal error.
		stop func(cancel context.CancelFunc, fatal func(error))
		// want is the error run returns (wantText: a prefix of it); nil for a clean stop.
		want     error
		wantText string
	}{
		{name: "ctx ends", stop: func(cancel context.CancelFunc, _ func(error)) { cancel() }},
		{name: "the driver's fatal error", stop: func(_ context.CancelFunc, fatal func(error)) { fatal(errFatal) }, want: errFatal},
		{name: "the metrics server fails", metrics: "127.0.0.1:no-port", wantText: "serve metrics: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx, cancel := context.WithCancel(klog.NewContext(t.Context(), logger))
			defer cancel()
			ctx, fatal := context.WithCancelCause(ctx)
			defer fatal(nil)
			c := runComponents(t, tc.metrics, fatal)
			if tc.stop != nil {
				tc.stop(cancel, c.fatal)
			}
			err := c.run(ctx)
			switch {
			case tc.want != nil && !errors.Is(err, tc.want),
				tc.wantText != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantText)),
				tc.want == nil && tc.wantText == "" && err != nil:
				t.Fatalf("run: %v, want %v%s", err, tc.want, tc.wantText)
			}
			clean := err == nil
			if got := logged(logger, "Shutting down"); got != clean {
				t.Errorf("logged shutting down: %v, want %v", got, clean)
			}
			// The DaemonSet is not in the API: a clean stop takes that for an uninstall.
			if _, err := os.Stat(c.cfg.DataDir()); errors.Is(err, os.ErrNotExist) != clean {
				t.Errorf("data directory after the stop: %v; want it removed: %v", err, clean)
			}
		})
	}
}

// logged reports whether logger, which buffers, logged msg.
func logged(logger klog.Logger, msg string) bool {
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		if e.Message == msg {
			return true
		}
	}
	return false
}

// runComponents are components ready to run on a mock node with a fake API server and a
// fake clock, serving metrics on metricsAddress (empty: none) and no liveness port.
func runComponents(t *testing.T, metricsAddress string, fatal func(error)) *components {
	t.Helper()
	h := newHarness(t, "dgx-h100")
	cfg := Config{NodeName: testNode, DriverName: testDriver, PluginsDir: t.TempDir(), CDIRoot: h.cdiDir,
		HealthcheckPort: -1, MetricsAddress: metricsAddress, CleanupInterval: time.Hour,
		Namespace: "rdma-dra", DaemonSetName: "rdma-dra-kubeletplugin"}
	h.dataDir = cfg.DataDir()
	must(t, os.MkdirAll(h.dataDir, 0o750))
	c := newComponents(cfg, fatal)
	c.clock, c.kube, c.publisher = h.clock, h.kube, h.pub
	var err error
	if c.monitor, err = health.New(health.Options{SysfsRoot: filepath.Join(mockNode(t, "dgx-h100"), mocknode.SysDir), Clock: h.clock, NodeName: testNode}); err != nil {
		t.Fatal(err)
	}
	if c.driver, err = h.newDriver(); err != nil {
		t.Fatal(err)
	}
	c.store = checkpoint.NewStore(h.dataDir, h.bootPath)
	c.specs = cdi.NewWriter(cdi.Options{DriverName: testDriver, SpecDir: h.cdiDir, DevRoot: "/dev", HookPath: testHookPath})
	return c
}
