package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/test/bench"
)

// binder records when each measured pod was first seen bound, from a pod informer.
type binder struct {
	mu      sync.Mutex
	bound   map[string]time.Time
	changed chan struct{}
}

func newBinder() *binder {
	return &binder{bound: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

func (b *binder) observe(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	b.mu.Lock()
	if _, seen := b.bound[pod.Name]; !seen {
		b.bound[pod.Name] = now
	}
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// boundAt returns when each named pod was bound, and how many are.
func (b *binder) boundAt(names []string) ([]time.Time, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]time.Time, len(names))
	n := 0
	for i, name := range names {
		if t, ok := b.bound[name]; ok {
			out[i] = t
			n++
		}
	}
	return out, n
}

// startBinder watches the measured pods' namespace.
func (c *Cluster) startBinder(ctx context.Context) *binder {
	b := newBinder()
	f := informers.NewSharedInformerFactoryWithOptions(c.cp.Client, 0, informers.WithNamespace(loadNamespace))
	inf := f.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.observe,
		UpdateFunc: func(_, obj any) { b.observe(obj) },
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return b
}

// Point is one measurement: a scenario's pods on a cluster of Nodes nodes publishing
// Model, with Fill of its ports taken.
type Point struct {
	Nodes    int     `json:"nodes"`
	Scenario string  `json:"scenario"`
	Model    Model   `json:"model"`
	Fill     float64 `json:"fill"`
	// PercentageOfNodesToScore is the scheduler's setting; 0 is its default (adaptive).
	PercentageOfNodesToScore int `json:"percentage_of_nodes_to_score,omitempty"`
	// Pods were created as fast as the harness could (a burst) and PodsPerSec is how
	// many the scheduler bound per second, from the first creation to the last binding.
	Pods       int     `json:"pods"`
	PodsPerSec float64 `json:"pods_per_sec"`
	// CreateSeconds is how long creating the burst took: far below Pods/PodsPerSec, or
	// the harness and not the scheduler was the limit.
	CreateSeconds float64 `json:"create_seconds"`
	// SchedulerCPUMsPerPod is the scheduler's CPU time (user and system) during the
	// burst, per pod.
	SchedulerCPUMsPerPod float64 `json:"scheduler_cpu_ms_per_pod"`
	// Latency is pod-created-to-bound, in milliseconds, of LatencyPods pods created at
	// LatencyRate per second after the burst: the configured rate, at most half the
	// burst's throughput, so that they do not queue.
	Latency     bench.Summary `json:"latency_ms"`
	LatencyPods int           `json:"latency_pods"`
	LatencyRate float64       `json:"latency_rate"`
}

// stallTimeout is how long a measurement waits without a single new binding.
const stallTimeout = 90 * time.Second

// measure runs one point: the burst, then the paced pods for latency, then removes them.
func (c *Cluster) measure(ctx context.Context, b *binder, s Scenario, fill float64, o Options, id string) (Point, error) {
	logger := klog.FromContext(ctx)
	o.Pods, o.LatencyPods = podsFor(s, c.nodes, fill, o.Pods, o.LatencyPods)
	p := Point{Nodes: len(c.nodes), Scenario: s.Name, Model: c.model, Fill: fill, PercentageOfNodesToScore: c.percentage, Pods: o.Pods, LatencyPods: o.LatencyPods}
	if s.ExtendedResource {
		p.Model = ""
	}
	template, err := c.ensureTemplate(ctx, s)
	if err != nil {
		return p, err
	}
	cpu0, err := cpuSeconds(c.sched.Pid())
	if err != nil {
		return p, err
	}
	profiled := c.profileBurst(ctx, p)
	defer profiled()
	names, created, err := c.createPods(ctx, s, template, id+"-b", o.Pods, 0)
	if err != nil {
		return p, err
	}
	p.CreateSeconds = created[len(created)-1].Sub(created[0]).Seconds()
	bound, err := waitBound(ctx, b, names)
	if err != nil {
		return p, fmt.Errorf("%s burst: %w", s.Name, c.explainPending(ctx, names, b, err))
	}
	cpu1, err := cpuSeconds(c.sched.Pid())
	if err != nil {
		return p, err
	}
	last := bound[0]
	for _, t := range bound {
		if t.After(last) {
			last = t
		}
	}
	p.PodsPerSec = float64(len(names)) / last.Sub(created[0]).Seconds()
	p.SchedulerCPUMsPerPod = (cpu1 - cpu0) * 1000 / float64(len(names))
	if o.LatencyPods > 0 {
		// Paced at no more than half the throughput just measured, so that the latency
		// is the scheduler's and not a queue's.
		p.LatencyRate = min(o.LatencyRate, p.PodsPerSec/2)
		names, created, err := c.createPods(ctx, s, template, id+"-l", o.LatencyPods, p.LatencyRate)
		if err != nil {
			return p, err
		}
		bound, err := waitBound(ctx, b, names)
		if err != nil {
			return p, fmt.Errorf("%s paced: %w", s.Name, c.explainPending(ctx, names, b, err))
		}
		lat := make([]time.Duration, len(names))
		for i := range names {
			lat[i] = bound[i].Sub(created[i])
		}
		p.Latency = bench.Summarize(lat)
	}
	if err := c.emptyNamespace(ctx, loadNamespace); err != nil {
		return p, err
	}
	logger.Info("Measured", "nodes", p.Nodes, "scenario", p.Scenario, "model", p.Model, "fill", fill, "percentageOfNodesToScore", p.PercentageOfNodesToScore,
		"podsPerSec", fmt.Sprintf("%.1f", p.PodsPerSec), "latencyP50ms", p.Latency.P50, "latencyP99ms", p.Latency.P99,
		"schedulerCPUMsPerPod", fmt.Sprintf("%.2f", p.SchedulerCPUMsPerPod))
	return p, nil
}

// profileDuration is how long the scheduler's CPU profile of a headline burst runs: less
// than the burst lasts at 1,000 nodes.
const profileDuration = 10 * time.Second

// profileBurst records the scheduler's CPU profile while the burst of a headline point
// (one share, default model, HeadlineFill) runs, into the logs as
// kube-scheduler-<nodes>-nodes[-percentage-<P>].pprof; other points are not profiled. The
// returned function waits until the profile is written.
func (c *Cluster) profileBurst(ctx context.Context, p Point) (wait func()) {
	if p.Scenario != ScenarioShare.Name || p.Model != ModelDefault || p.Fill != HeadlineFill {
		return func() {}
	}
	name := fmt.Sprintf("kube-scheduler-%d-nodes", p.Nodes)
	if p.PercentageOfNodesToScore != 0 {
		name += fmt.Sprintf("-percentage-%d", p.PercentageOfNodesToScore)
	}
	path := filepath.Join(c.logs, name+".pprof")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.sched.CPUProfile(ctx, profileDuration, path); err != nil {
			klog.FromContext(ctx).Error(err, "No CPU profile of the burst")
			return
		}
		klog.FromContext(ctx).Info("Scheduler CPU profile of the burst", "path", path)
	}()
	return func() { <-done }
}

// ensureTemplate creates the scenario's claim template once; "" for the extended resource.
func (c *Cluster) ensureTemplate(ctx context.Context, s Scenario) (string, error) {
	if s.ExtendedResource {
		return "", nil
	}
	t := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: loadNamespace},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: s.claim()},
	}
	_, err := c.cp.Client.ResourceV1().ResourceClaimTemplates(loadNamespace).Create(ctx, t, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create claim template %s: %w", s.Name, err)
	}
	return s.Name, nil
}

// createPods creates n pods named prefix-i: at rate per second, or with 16 workers as
// fast as the API server takes them when rate is 0. It returns their names and when each
// create call started.
func (c *Cluster) createPods(ctx context.Context, s Scenario, template, prefix string, n int, rate float64) ([]string, []time.Time, error) {
	names := make([]string, n)
	created := make([]time.Time, n)
	create := func(ctx context.Context, i int) error {
		names[i] = fmt.Sprintf("%s-%05d", prefix, i)
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: loadNamespace}, Spec: s.podSpec(template)}
		created[i] = time.Now()
		if _, err := c.cp.Client.CoreV1().Pods(loadNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", names[i], err)
		}
		return nil
	}
	if rate <= 0 {
		return names, created, parallelN(ctx, n, 16, create)
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := range n {
		if err := create(ctx, i); err != nil {
			return nil, nil, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-tick.C:
		}
	}
	return names, created, nil
}

var errStalled = errors.New("no pod was bound for " + stallTimeout.String())

// waitBound waits until every named pod is bound; it fails when stallTimeout passes
// without progress.
func waitBound(ctx context.Context, b *binder, names []string) ([]time.Time, error) {
	lastN, lastProgress := -1, time.Now()
	for {
		bound, n := b.boundAt(names)
		if n == len(names) {
			return bound, nil
		}
		if n != lastN {
			lastN, lastProgress = n, time.Now()
		} else if time.Since(lastProgress) > stallTimeout {
			return nil, fmt.Errorf("%d of %d pods bound: %w", n, len(names), errStalled)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-b.changed:
		case <-time.After(time.Second):
		}
	}
}

// explainPending adds the scheduler's reason for one pod that is not bound to err.
func (c *Cluster) explainPending(ctx context.Context, names []string, b *binder, err error) error {
	bound, _ := b.boundAt(names)
	for i, t := range bound {
		if !t.IsZero() {
			continue
		}
		pod, gerr := c.cp.Client.CoreV1().Pods(loadNamespace).Get(ctx, names[i], metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("%w (pod %s: %v)", err, names[i], gerr)
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == v1.PodScheduled {
				return fmt.Errorf("%w (pod %s: %s: %s)", err, names[i], cond.Reason, cond.Message)
			}
		}
		return fmt.Errorf("%w (pod %s has no PodScheduled condition)", err, names[i])
	}
	return err
}

// cpuSeconds is the user and system CPU time of a process so far.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time of pid %d: %w", pid, err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return (utime + stime) / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times, 100 on Linux.
const clockTicks = 100
