package bench

import (
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Options configure a run.
type Options struct {
	// Repo is the repository root.
	Repo string
	// Out is the output directory, <Repo>/_output/bench: results.json, logs, binaries
	// and the working directory of the processes.
	Out string
	// Smoke makes a quick run that checks the harness end to end: small loads, a short
	// idle time, a one-second rescan so the event flips finish fast. Its numbers mean
	// nothing.
	Smoke bool
	// Idle is how long the idle plugin runs before its RSS is read.
	Idle time.Duration
	// Flips is the number of port state flips of event_to_slice_ms.
	Flips int
	// PluginBinary, when set, is a prebuilt plugin to measure instead of building the
	// tree: for what-if experiments with a patched plugin. The hook must sit next to it.
	PluginBinary string
}

// scale is what a run measures; Smoke shrinks it.
type scale struct {
	discoverySizes     []int
	discoveryMinScans  int
	discoveryMinTime   time.Duration
	allocNodes         []int
	compareNodes       int
	allocMinPods       int
	allocMinTime       time.Duration
	prepareRounds      int
	prepareMaxTime     time.Duration
	throughputLevels   []int
	throughputDuration time.Duration
	rescan             time.Duration // zero: the plugin's default
	// compareRounds and compareDuration shape the comparison with the reference driver:
	// rounds of each load, each load this long.
	compareRounds   int
	compareDuration time.Duration
	// compareC1Cycles is the length of the 1-concurrent load, within the client's burst.
	compareC1Cycles int
	// attachCycles and attachMaxTime bound the macvlan attach+detach cycles.
	attachCycles  int
	attachMaxTime time.Duration
}

func (o Options) scale() scale {
	if o.Smoke {
		return scale{
			discoverySizes: []int{8, 320}, discoveryMinScans: 2,
			allocNodes: []int{100, 1000}, compareNodes: 100, allocMinPods: 1,
			prepareRounds: 2, prepareMaxTime: 10 * time.Second, throughputLevels: []int{1, 64}, throughputDuration: 500 * time.Millisecond,
			rescan: time.Second, compareRounds: 1, compareDuration: 500 * time.Millisecond, compareC1Cycles: 5,
			attachCycles: 10, attachMaxTime: 10 * time.Second,
		}
	}
	return scale{
		discoverySizes: []int{8, 16, 32, 64, 320}, discoveryMinScans: 20, discoveryMinTime: time.Second,
		allocNodes: []int{100, 250, 500, 1000}, compareNodes: 1000, allocMinPods: 10, allocMinTime: 2 * time.Second,
		prepareRounds: 40, prepareMaxTime: 40 * time.Second, throughputLevels: []int{1, 4, 16, 64}, throughputDuration: 5 * time.Second,
		compareRounds: 6, compareDuration: 3 * time.Second, compareC1Cycles: 40,
		attachCycles: 200, attachMaxTime: 30 * time.Second,
	}
}

// Run measures everything and returns the results; a failed step leaves its figures
// empty and is recorded in Meta.Errors, so that one broken part does not hide the rest.
func Run(ctx context.Context, o Options) *Results {
	logger := klog.FromContext(ctx)
	start := time.Now()
	r := &Results{Meta: Meta{
		Smoke: o.Smoke, Started: start.UTC().Format(time.RFC3339), Commit: GitCommit(o.Repo),
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), CPUModel: CPUModel(), LoadBefore: LoadAverage(),
	}}
	fail := func(step string, err error) {
		logger.Error(err, "Benchmark step failed", "step", step)
		r.Meta.Errors = append(r.Meta.Errors, step+": "+err.Error())
	}
	sc := o.scale()
	work := filepath.Join(o.Out, "work")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		fail("setup", err)
		return r
	}
	// Binaries first: compiling while measuring would measure the compiler.
	pluginBin, source, buildErr := o.PluginBinary, "prebuilt binary "+o.PluginBinary, error(nil)
	if pluginBin == "" {
		pluginBin, source, buildErr = buildPlugin(ctx, o.Repo, filepath.Join(o.Out, "bin"), filepath.Join(o.Out, "src"))
	}
	if buildErr != nil {
		fail("build plugin", buildErr)
	}
	r.Meta.PluginSource = source
	ref := reference{}
	ref.bin, ref.version, ref.err = buildReference(ctx, o.Repo, filepath.Join(o.Out, "bin"))
	if ref.err != nil {
		fail("build reference driver", ref.err)
	}
	if err := measureLocal(ctx, o, sc, work, r); err != nil {
		fail("local", err)
	}
	if buildErr == nil {
		if err := measureCluster(ctx, o, sc, work, pluginBin, ref, r); err != nil {
			fail("cluster", err)
		}
	}
	r.Meta.LoadAfter = LoadAverage()
	r.Meta.Seconds = time.Since(start).Round(time.Second).Seconds()
	return r
}

// reference is the built reference driver, or why it could not be built.
type reference struct {
	bin, version string
	err          error
}

// measureLocal measures what needs no API server: network attach, discovery, slice
// sizes, allocation.
func measureLocal(ctx context.Context, o Options, sc scale, work string, r *Results) error {
	var errs []error
	if err := measureAttach(ctx, sc, tmpfsBase(work), r); err != nil {
		errs = append(errs, fmt.Errorf("network attach: %w", err))
	}
	points, err := measureDiscovery(ctx, filepath.Join(work, "discovery"), sc.discoverySizes, sc.discoveryMinScans, sc.discoveryMinTime)
	if err != nil {
		errs = append(errs, fmt.Errorf("discovery: %w", err))
	}
	r.Details.Discovery = points
	for _, p := range points {
		if p.Ports == 320 {
			r.DiscoveryMSLarge = ptr(p.Scan.P50)
		}
	}
	inv, err := eightPortInventory(ctx, work)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	sizes, err := measureSliceSizes(inv, append([]Variant{DefaultVariant}, comparedVariants...))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	r.Details.SliceSizes = sizes
	r.SliceBytesPerNode = ptr(float64(sizes[0].Bytes))
	classes, err := DeviceClasses(o.Repo)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, n := range sc.allocNodes {
		p, err := measureAlloc(ctx, inv, DefaultVariant, n, sc.allocMinPods, sc.allocMinTime, classes)
		if err != nil {
			errs = append(errs, fmt.Errorf("allocation over %d nodes: %w", n, err))
			continue
		}
		klog.FromContext(ctx).Info("Measured allocation", "variant", p.Variant.Name, "nodes", n, "msPerPod", p.PerPod.Mean)
		r.Details.AllocNodes = append(r.Details.AllocNodes, p)
		if n == 1000 {
			r.AllocMSPerPod1000Nodes = ptr(p.PerPod.Mean)
		}
	}
	for _, v := range comparedVariants {
		p, err := measureAlloc(ctx, inv, v, sc.compareNodes, sc.allocMinPods, sc.allocMinTime, classes)
		if err != nil {
			errs = append(errs, fmt.Errorf("allocation with %s: %w", v.Name, err))
			continue
		}
		klog.FromContext(ctx).Info("Measured allocation", "variant", p.Variant.Name, "nodes", sc.compareNodes, "msPerPod", p.PerPod.Mean)
		r.Details.AllocModels = append(r.Details.AllocModels, p)
	}
	return errors.Join(errs...)
}

// measureCluster starts the control plane and two plugins: one under load (prepare,
// throughput, port flips) and one left idle for its memory.
func measureCluster(ctx context.Context, o Options, sc scale, work, pluginBin string, ref reference, r *Results) error {
	logger := klog.FromContext(ctx)
	logs := filepath.Join(o.Out, "logs")
	bins, err := controlplane.CachedBinaries(ctx, o.Repo)
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, bins, filepath.Join(work, "control-plane"), logs)
	if err != nil {
		return err
	}
	defer cp.Stop(ctx)
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	cdiBase, cleanupCDI, err := tmpfsDir(work)
	if err != nil {
		return err
	}
	defer cleanupCDI()
	newPlugin := func(name string, rescan time.Duration) (*Plugin, error) {
		// The plugin's slices are owned by its Node object, as on a real cluster.
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create node %s: %w", name, err)
		}
		port, err := controlplane.FreePorts(1)
		if err != nil {
			return nil, err
		}
		return startPlugin(ctx, cp.Client, PluginOptions{
			Binary: pluginBin, Dir: filepath.Join(work, name), CDIDir: filepath.Join(cdiBase, name), MetadataRoot: filepath.Join(cdiBase, name+"-metadata"),
			NodeName: name, Ports: 8, Kubeconfig: cp.Kubeconfig, RescanInterval: rescan,
			LogFile: filepath.Join(logs, name+".log"), MetricsAddress: "127.0.0.1:" + strconv.Itoa(port[0]),
		})
	}
	idle, err := newPlugin("bench-node-idle", 0)
	if err != nil {
		return err
	}
	defer idle.Stop(ctx)
	idleSince := time.Now()
	if stored, err := nodeSlices(ctx, cp.Client, idle.Opts.NodeName); err == nil {
		for i := range stored {
			n, _ := sliceBytes(toPtrs(stored[i : i+1]))
			r.Details.StoredBytes += n
		}
	}
	loaded, err := newPlugin("bench-node-load", sc.rescan)
	if err != nil {
		return err
	}
	defer loaded.Stop(ctx)
	var errs []error
	if err := measurePrepare(ctx, cp, loaded, sc, r); err != nil {
		errs = append(errs, err)
	}
	if ref.err == nil {
		if err := compareReference(ctx, cp, loaded, ref.bin, ref.version, work, logs, cdiBase, sc, r); err != nil {
			errs = append(errs, fmt.Errorf("comparison with the reference driver: %w", err))
		}
	}
	if err := checkStatusWritten(ctx, cp, loaded, r.Details.Reference, r); err != nil {
		errs = append(errs, fmt.Errorf("claim status check: %w", err))
	}
	ev, err := measureEventToSlice(ctx, cp.Client, loaded, eventPeriod(sc.rescan), o.Flips)
	if err != nil {
		errs = append(errs, fmt.Errorf("event to slice: %w", err))
	} else {
		ev.RescanInterval = "30s (default)"
		if sc.rescan > 0 {
			ev.RescanInterval = sc.rescan.String()
		}
		r.Details.Event = &ev
		r.EventToSliceMS = ptr(ev.Latency.P50)
	}
	if wait := o.Idle - time.Since(idleSince); wait > 0 {
		logger.Info("Waiting for the idle plugin", "remaining", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return errors.Join(append(errs, ctx.Err())...)
		case <-time.After(wait):
		}
	}
	rss, err := rssMiB(idle.Pid())
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	idleRes := &IdleResult{Seconds: time.Since(idleSince).Round(time.Second).Seconds(), RSSMiB: rss}
	if l, err := rssMiB(loaded.Pid()); err == nil {
		idleRes.LoadedRSSMiB = l
	}
	r.Details.Idle = idleRes
	r.IdleRSSMiB = ptr(rss)
	return errors.Join(errs...)
}

// eventPeriod is the window the port flips are spread over: one rescan period.
func eventPeriod(rescan time.Duration) time.Duration {
	if rescan > 0 {
		return rescan
	}
	return 30 * time.Second
}

// measurePrepare runs the prepare loads against the plugin.
func measurePrepare(ctx context.Context, cp *controlplane.ControlPlane, p *Plugin, sc scale, r *Results) error {
	client, closeConn, err := dialPlugin(p)
	if err != nil {
		return err
	}
	defer closeConn() //nolint:errcheck // nothing to do about it
	one, err := createAllocatedClaims(ctx, cp.Client, p, "one", 64, 1)
	if err != nil {
		return err
	}
	eight, err := createAllocatedClaims(ctx, cp.Client, p, "eight", 16, 8)
	if err != nil {
		return err
	}
	// Warm up: connections, the plugin's first checkpoint, the API server's caches.
	if _, err := runLoad(ctx, client, one[:16], 1, 2, sc.prepareMaxTime); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	res, err := runLoad(ctx, client, one[:16], 1, sc.prepareRounds, sc.prepareMaxTime)
	if err != nil {
		return fmt.Errorf("1-device claims: %w", err)
	}
	r.Details.Prepare1, r.PrepareP99MS = &res, ptr(res.Prepare.P99)
	res8, err := runLoad(ctx, client, eight, 8, sc.prepareRounds, sc.prepareMaxTime)
	if err != nil {
		return fmt.Errorf("8-device claims: %w", err)
	}
	r.Details.Prepare8, r.PrepareP99MS8Dev = &res8, ptr(res8.Prepare.P99)
	for _, c := range sc.throughputLevels {
		res, err := runLoad(ctx, client, one[:c], 1, 0, sc.throughputDuration)
		if err != nil {
			return fmt.Errorf("throughput at %d: %w", c, err)
		}
		klog.FromContext(ctx).Info("Measured prepare throughput", "concurrency", c, "perSec", res.PerSec, "p99ms", res.Prepare.P99)
		r.Details.Throughput = append(r.Details.Throughput, res)
		if c == 64 {
			r.PreparePerSec = ptr(res.PerSec)
		}
	}
	return nil
}

// tmpfsBase is /dev/shm, a tmpfs, or fallback when there is none.
func tmpfsBase(fallback string) string {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return fallback
	}
	return "/dev/shm"
}

// tmpfsDir returns a fresh directory on a tmpfs (/dev/shm), where a node keeps
// /var/run/cdi, or below fallback when there is none.
func tmpfsDir(fallback string) (string, func(), error) {
	dir, err := os.MkdirTemp(tmpfsBase(fallback), "rdma-dra-bench-cdi-")
	if err != nil {
		return "", nil, fmt.Errorf("create CDI directory: %w", err)
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

// GitCommit describes the repository's checked-out commit, "-dirty" when changed.
func GitCommit(repo string) string {
	out, err := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// LoadAverage is the 1-minute load average, -1 when unknown.
func LoadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// CPUModel is the first CPU's model name.
func CPUModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
