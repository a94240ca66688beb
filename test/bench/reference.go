package bench

import (
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"

	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// The reference driver: kubernetes-sigs/dra-example-driver's kubelet plugin, gpu profile,
// at the version test/bench/reference/go.mod pins, with its own Kubernetes libraries
// (go.mod says why), built from the Go module proxy.
const (
	referenceModule  = "sigs.k8s.io/dra-example-driver"
	referencePackage = referenceModule + "/cmd/dra-example-kubeletplugin"
	referenceDriver  = "gpu.example.com"
	referenceNode    = "bench-node-reference"
	// referenceGPUs is the reference node's size: one GPU per concurrent claim, since
	// its gpu profile hands each GPU out whole.
	referenceGPUs = 16
	// compareConcurrency is the concurrency of the sustained comparison.
	compareConcurrency = 16
	// defaultQPS and defaultBurst are this driver's default client limits, given to
	// both plugins.
	defaultQPS, defaultBurst = 50, 100
)

// buildReference builds the reference plugin into binDir from the pinned module. The
// build module's go.sum pins every module's hash, so nothing unverified is built.
func buildReference(ctx context.Context, repo, binDir string) (path, version string, err error) {
	dir := filepath.Join(repo, "test", "bench", "reference")
	version, err = referenceVersion(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(binDir, "dra-example-kubeletplugin")
	cmd := exec.CommandContext(ctx, controlplane.GoCommand(), "build", "-trimpath", "-mod=readonly", "-o", path, referencePackage)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", version, fmt.Errorf("build %s@%s: %w\n%s", referencePackage, version, err, out)
	}
	return path, version, nil
}

// referenceVersion reads the pinned version of the reference module from go.mod.
func referenceVersion(goMod string) (string, error) {
	data, err := os.ReadFile(goMod)
	if err != nil {
		return "", fmt.Errorf("read reference build module: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == referenceModule {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", goMod, referenceModule)
}

// referencePlugin is a running reference kubelet plugin.
type referencePlugin struct {
	socket string
	proc   *controlplane.Process
}

// startReference starts the reference plugin for node with the same client limits and
// the same kinds of directories as this driver's plugin, and waits for its slices.
func startReference(ctx context.Context, kube kubernetes.Interface, bin, dir, cdiDir, kubeconfig, logFile string) (*referencePlugin, error) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: referenceNode}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node %s: %w", referenceNode, err)
	}
	plugins, registry := filepath.Join(dir, "plugins"), filepath.Join(dir, "plugins_registry")
	for _, d := range []string{plugins, registry, cdiDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	proc, err := controlplane.StartProcess(ctx, "dra-example-kubeletplugin", logFile, bin,
		"--node-name="+referenceNode, "--device-profile=gpu", "--num-devices="+strconv.Itoa(referenceGPUs),
		"--cdi-root="+cdiDir, "--kubelet-registrar-directory-path="+registry, "--kubelet-plugins-directory-path="+plugins,
		"--kubeconfig="+kubeconfig, "--kube-api-qps="+strconv.Itoa(defaultQPS), "--kube-api-burst="+strconv.Itoa(defaultBurst),
		"--healthcheck-port=-1", "--metrics-port=-1")
	if err != nil {
		return nil, err
	}
	p := &referencePlugin{socket: filepath.Join(plugins, referenceDriver, "dra.sock"), proc: proc}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if proc.Exited() {
			return nil, fmt.Errorf("reference plugin exited: %v; see %s", proc.Err(), logFile)
		}
		if _, err := os.Stat(p.socket); err == nil {
			if s, err := nodeSlices(ctx, kube, referenceNode); err == nil && len(s) > 0 {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			proc.Stop(ctx, 10*time.Second)
			return nil, fmt.Errorf("reference plugin not ready after 60s; see %s", logFile)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createReferenceClaims creates n claims of one GPU each (claim i gets gpu-i) and
// allocates them through the status subresource.
func createReferenceClaims(ctx context.Context, kube kubernetes.Interface, n int) ([]*drapb.Claim, error) {
	var out []*drapb.Claim
	for i := range n {
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("ref-%d", i)},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: referenceDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			}}}},
		}
		created, err := kube.ResourceV1().ResourceClaims(benchNamespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create claim %s: %w", claim.Name, err)
		}
		created.Status.Allocation = &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: referenceDriver, Pool: referenceNode, Device: fmt.Sprintf("gpu-%d", i%referenceGPUs),
			}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{referenceNode},
			}}}}},
		}
		if _, err := kube.ResourceV1().ResourceClaims(benchNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("allocate claim %s: %w", claim.Name, err)
		}
		out = append(out, &drapb.Claim{Namespace: benchNamespace, Name: created.Name, Uid: string(created.UID)})
	}
	return out, nil
}

// ReferenceComparison is this driver against the reference driver on one control plane,
// both at this driver's default client limits, in rounds that alternate which goes first.
type ReferenceComparison struct {
	Reference string `json:"reference"`
	Rounds    int    `json:"rounds"`
	// LoadSeconds is the length of each sustained load; C1Cycles the cycles of each
	// 1-concurrent load.
	LoadSeconds float64 `json:"load_seconds"`
	C1Cycles    int     `json:"c1_cycles"`
	// PrepareP50C1 are the prepare p50s (ms) at concurrency 1, per round.
	DriverPrepareP50C1    []float64 `json:"driver_prepare_p50_ms_c1"`
	ReferencePrepareP50C1 []float64 `json:"reference_prepare_p50_ms_c1"`
	// CyclesC16 are the sustained cycles/s at compareConcurrency, per round; the
	// driver's include the time its status writer needed to drain afterwards.
	DriverCycles    []float64 `json:"driver_cycles_per_sec_c16"`
	ReferenceCycles []float64 `json:"reference_cycles_per_sec_c16"`
	// StatusDrainMS is how long the driver's status writer was still busy after each
	// sustained load.
	StatusDrainMS []float64 `json:"status_drain_ms"`
	// StatusChecked is how many claims the final status check prepared; StatusMissing
	// how many of them had no status afterwards; StatusFailed the plugin's count of
	// updates refused for good over the whole run.
	StatusChecked int     `json:"status_checked"`
	StatusMissing int     `json:"status_missing"`
	StatusFailed  float64 `json:"status_failed"`
}

// compareReference runs the comparison against the loaded plugin p and fills the
// headline ratios and the dropped status count.
func compareReference(ctx context.Context, cp *controlplane.ControlPlane, p *Plugin, refBin, refVersion, work, logs, cdiBase string, sc scale, r *Results) error {
	logger := klog.FromContext(ctx)
	ref, err := startReference(ctx, cp.Client, refBin, filepath.Join(work, referenceNode), filepath.Join(cdiBase, referenceNode), cp.Kubeconfig, filepath.Join(logs, referenceNode+".log"))
	if err != nil {
		return err
	}
	defer ref.proc.Stop(ctx, 10*time.Second)
	refClient, closeRef, err := dialSocket(ref.socket)
	if err != nil {
		return err
	}
	defer closeRef() //nolint:errcheck // nothing to do about it
	ours, closeOurs, err := dialPlugin(p)
	if err != nil {
		return err
	}
	defer closeOurs() //nolint:errcheck // nothing to do about it
	ourClaims, err := createAllocatedClaims(ctx, cp.Client, p, "cmp", compareConcurrency, 1)
	if err != nil {
		return err
	}
	refClaims, err := createReferenceClaims(ctx, cp.Client, compareConcurrency)
	if err != nil {
		return err
	}
	// Warm up both: connections, checkpoints, the API server's caches.
	for _, w := range []struct {
		c      drapb.DRAPluginClient
		claims []*drapb.Claim
	}{{ours, ourClaims}, {refClient, refClaims}} {
		if _, err := runLoad(ctx, w.c, w.claims, 1, 2, sc.prepareMaxTime); err != nil {
			return fmt.Errorf("warm up: %w", err)
		}
	}
	cmp := &ReferenceComparison{Reference: referenceModule + "@" + refVersion + " (gpu profile)", Rounds: sc.compareRounds, LoadSeconds: sc.compareDuration.Seconds(), C1Cycles: sc.compareC1Cycles}
	r.Details.Reference = cmp
	for round := range sc.compareRounds {
		// A B, then B A: drift of the shared machine hits both alike.
		order := []bool{true, false}
		if round%2 == 1 {
			order = []bool{false, true}
		}
		for _, driver := range order {
			client, claims := refClient, refClaims
			if driver {
				client, claims = ours, ourClaims
			}
			// A single pod on a quiet node: the client's token bucket is full and the load
			// stays within the burst, so the figure is the plugin's latency and not its
			// rate limiter's. The sustained load below goes past the burst, where both
			// plugins are held to the same QPS; it too starts with a full bucket, or the
			// faster plugin would start it with fewer tokens (less time to refill since
			// the 1-concurrent load).
			if err := refillTokens(ctx); err != nil {
				return err
			}
			one, err := runLoad(ctx, client, claims[:1], 1, sc.compareC1Cycles, sc.compareDuration)
			if err != nil {
				return fmt.Errorf("round %d, concurrency 1, driver %v: %w", round, driver, err)
			}
			if err := refillTokens(ctx); err != nil {
				return err
			}
			many, err := runLoad(ctx, client, claims, 1, 0, sc.compareDuration)
			if err != nil {
				return fmt.Errorf("round %d, concurrency %d, driver %v: %w", round, compareConcurrency, driver, err)
			}
			if !driver {
				cmp.ReferencePrepareP50C1 = append(cmp.ReferencePrepareP50C1, one.Prepare.P50)
				cmp.ReferenceCycles = append(cmp.ReferenceCycles, many.PerSec)
				continue
			}
			drain, err := waitStatusDrained(ctx, p, 60*time.Second)
			if err != nil {
				return err
			}
			cmp.DriverPrepareP50C1 = append(cmp.DriverPrepareP50C1, one.Prepare.P50)
			cmp.DriverCycles = append(cmp.DriverCycles, float64(many.Cycles)/(many.Seconds+drain.Seconds()))
			cmp.StatusDrainMS = append(cmp.StatusDrainMS, ms(drain))
		}
		logger.Info("Compared with the reference driver", "round", round,
			"driverP50ms", cmp.DriverPrepareP50C1[round], "referenceP50ms", cmp.ReferencePrepareP50C1[round],
			"driverCycles", cmp.DriverCycles[round], "referenceCycles", cmp.ReferenceCycles[round])
	}
	r.PrepareP50RatioVsReferenceC1 = ptr(median(cmp.DriverPrepareP50C1) / median(cmp.ReferencePrepareP50C1))
	r.CyclesRatioVsReferenceDefaultLimits = ptr(median(cmp.DriverCycles) / median(cmp.ReferenceCycles))
	return nil
}

// checkStatusWritten prepares every claim once, lets the plugin's status writer drain,
// and counts the claims whose status.devices the API server does not have, plus the
// updates the plugin counted as refused for good: the status updates the run dropped.
func checkStatusWritten(ctx context.Context, cp *controlplane.ControlPlane, p *Plugin, cmp *ReferenceComparison, r *Results) error {
	client, closeConn, err := dialPlugin(p)
	if err != nil {
		return err
	}
	defer closeConn() //nolint:errcheck // nothing to do about it
	list, err := cp.Client.ResourceV1().ResourceClaims(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	var claims []*drapb.Claim
	for _, c := range list.Items {
		if a := c.Status.Allocation; a != nil && len(a.Devices.Results) > 0 && a.Devices.Results[0].Pool == p.Pool() {
			claims = append(claims, &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)})
		}
	}
	// One group of claims (one-*, eight-*, cmp-*) at a time: all of them at once would
	// ask for more shares of a port than it has.
	groups := map[string][]*drapb.Claim{}
	var names []string
	for _, c := range claims {
		g := c.Name[:strings.LastIndexByte(c.Name, '-')+1]
		if groups[g] == nil {
			names = append(names, g)
		}
		groups[g] = append(groups[g], c)
	}
	missing := 0
	for _, g := range names {
		n, err := statusOfGroup(ctx, cp, client, p, groups[g])
		if err != nil {
			return err
		}
		missing += n
	}
	failed, err := scrapeMetric(ctx, p, `rdma_dra_claim_status_updates_total{result="failed"}`)
	if err != nil {
		return err
	}
	if cmp != nil {
		cmp.StatusChecked, cmp.StatusMissing, cmp.StatusFailed = len(claims), missing, failed
	}
	r.StatusUpdatesDropped = ptr(float64(missing) + failed)
	return nil
}

// statusOfGroup prepares claims at once, waits until the plugin wrote their status,
// counts those whose status.devices the API server lacks, and unprepares them again.
func statusOfGroup(ctx context.Context, cp *controlplane.ControlPlane, client drapb.DRAPluginClient, p *Plugin, claims []*drapb.Claim) (int, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(claims))
	for i, c := range claims {
		wg.Go(func() {
			res, err := client.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{c}})
			if err == nil && res.Claims[c.Uid].GetError() != "" {
				err = errors.New(res.Claims[c.Uid].GetError())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("prepare for the status check: %w", err)
	}
	if _, err := waitStatusDrained(ctx, p, 2*time.Minute); err != nil {
		return 0, err
	}
	missing := 0
	for _, c := range claims {
		got, err := cp.Client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return 0, fmt.Errorf("get claim %s: %w", c.Name, err)
		}
		if n := len(got.Status.Devices); n == 0 || n != len(got.Status.Allocation.Devices.Results) {
			missing++
		}
		if _, err := client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{c}}); err != nil {
			return 0, fmt.Errorf("unprepare %s: %w", c.Name, err)
		}
	}
	return missing, nil
}

// refillTokens waits until a plugin's client, which spent its token bucket, has it full
// again: burst/QPS seconds.
func refillTokens(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(defaultBurst/defaultQPS) * time.Second):
		return nil
	}
}

// waitStatusDrained waits until the plugin reports no pending claim status and returns
// how long that took: zero when nothing was pending at the first look (the scrape's own
// round trip is not a backlog), else the time until a scrape found none pending.
func waitStatusDrained(ctx context.Context, p *Plugin, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for first := true; ; first = false {
		n, err := scrapeMetric(ctx, p, "rdma_dra_claim_status_pending")
		if err != nil {
			return 0, err
		}
		if n == 0 && first {
			return 0, nil
		}
		if n == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("%g claim statuses still pending after %s", n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scrapeMetric reads one sample of the plugin's /metrics, by its name and labels as
// the exposition format prints them.
func scrapeMetric(ctx context.Context, p *Plugin, series string) (float64, error) {
	if p.Opts.MetricsAddress == "" {
		return 0, errors.New("the plugin serves no metrics")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Opts.MetricsAddress+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape plugin metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("scrape plugin metrics: %w", err)
	}
	return 0, fmt.Errorf("plugin metrics have no %s", series)
}

// dialSocket is dialPlugin for any DRA socket.
func dialSocket(socket string) (drapb.DRAPluginClient, func() error, error) {
	return dialPlugin(&Plugin{Socket: socket})
}

// median of a non-empty sample.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
