package scale

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/test/bench"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
)

// Namespaces of the measured pods and of the pods that fill the cluster.
const (
	loadNamespace = "scale"
	fillNamespace = "scale-fill"
)

// schedulerLimits are the scheduler's client limits. Its default (50 QPS) would cap a
// DRA pod, which costs two writes (the claim's allocation and the binding), at half the
// rate of a pod with an extended resource (one write): the harness measures the
// scheduler, not its client's rate limiter, so both are raised far above what this
// machine can do.
var schedulerLimits = controlplane.ClientLimits{QPS: 5000, Burst: 5000}

// TunedPercentage is the percentageOfNodesToScore of the tuned scheduler the last step
// measures beside the default, adaptive one (which looks for max(50 - nodes/125, 5)%
// of the nodes feasible, at least 100). At up to 1,000 nodes 10% means the floor of 100
// nodes.
const TunedPercentage = 10

// Cluster is the running simulated cluster.
type Cluster struct {
	cp      *controlplane.ControlPlane
	sched   *controlplane.Component
	kcm     *controlplane.Component
	kwok    *controlplane.Process
	kinds   []*kind
	nodes   []*simNode
	plugins kubernetes.Interface
	// requests counts the simulated plugins' API requests.
	requests *requestCounter
	model    Model
	// work and logs are the cluster's directories; percentage is the running
	// scheduler's percentageOfNodesToScore (0: the default); schedPeakMB is the peak
	// RSS of the schedulers stopped before it.
	work, logs  string
	percentage  int
	schedPeakMB float64
}

// startCluster starts the control plane, the scheduler, the controller manager and kwok,
// creates n nodes and publishes their slices in the default model.
func startCluster(ctx context.Context, o Options, n int, work, logs string) (_ *Cluster, err error) {
	logger := klog.FromContext(ctx)
	c := &Cluster{requests: &requestCounter{}, work: work, logs: logs}
	defer func() {
		if err != nil {
			c.Stop(ctx)
		}
	}()
	bins, err := controlplane.CachedBinaries(ctx, o.Repo)
	if err != nil {
		return nil, err
	}
	if c.kinds, err = discoverKinds(ctx, filepath.Join(work, "mock")); err != nil {
		return nil, err
	}
	if c.cp, err = controlplane.Start(ctx, bins, filepath.Join(work, "control-plane"), logs); err != nil {
		return nil, err
	}
	if err := c.createAPIObjects(ctx, o.Repo); err != nil {
		return nil, err
	}
	limits := controlplane.ClientLimits{QPS: 1000, Burst: 2000}
	// The claim controller makes claims from templates and releases them; the node
	// lifecycle controller lifts the not-ready taint the API server puts on new nodes
	// once kwok reports them Ready.
	lease := leaseDuration(n)
	if c.kcm, err = c.cp.StartControllerManager(ctx, logs, []string{"resourceclaim-controller", "node-lifecycle-controller"}, limits,
		"--node-monitor-grace-period="+max(lease, defaultNodeMonitorGracePeriod).String()); err != nil {
		return nil, err
	}
	if c.sched, err = c.cp.StartScheduler(ctx, filepath.Join(work, "scheduler"), logs, controlplane.SchedulerConfig{Limits: schedulerLimits}); err != nil {
		return nil, err
	}
	if c.kwok, err = startKwok(ctx, o.Kwok, o.KwokStages, c.cp.Kubeconfig, logs, lease); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := c.createNodes(ctx, n); err != nil {
		return nil, err
	}
	logger.Info("Nodes are Ready", "nodes", n, "seconds", time.Since(start).Seconds())
	if c.plugins, err = pluginClient(c.cp.Config, c.requests); err != nil {
		return nil, err
	}
	start = time.Now()
	for _, node := range c.nodes {
		node.pub = newNodePublisher(ctx, c.plugins, node.obj, node.kind)
	}
	for _, node := range pluginSample(c.nodes) {
		node.running = true
	}
	if err := c.publish(ctx, ModelDefault); err != nil {
		return nil, err
	}
	logger.Info("Slices are published", "nodes", n, "seconds", time.Since(start).Seconds())
	return c, nil
}

// defaultNodeMonitorGracePeriod is the node lifecycle controller's default grace period.
const defaultNodeMonitorGracePeriod = 50 * time.Second

// maxLeaseWrites is the most node lease renewals per second the simulated nodes make.
const maxLeaseWrites = 100

// leaseDuration is the simulated nodes' lease duration. kwok renews a lease at a quarter
// of it, as the kubelet does: with the kubelet's 40 s, 5,000 nodes would write 500
// leases a second, work for the API server and etcd that a real cluster spreads over
// its control-plane machines and that would take this machine's cores from what is
// measured. Above 1,000 nodes the duration grows so that the nodes renew at most
// maxLeaseWrites leases a second, and the node lifecycle controller's grace period
// grows with it.
func leaseDuration(nodes int) time.Duration {
	return max(40*time.Second, time.Duration(4*nodes/maxLeaseWrites)*time.Second)
}

// startKwok runs kwok for the annotated nodes with the given stages: they keep the nodes
// Ready with a lease and make bound pods Running.
func startKwok(ctx context.Context, bin string, stages []string, kubeconfig, logs string, lease time.Duration) (*controlplane.Process, error) {
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return nil, err
	}
	return controlplane.StartProcess(ctx, "kwok", filepath.Join(logs, "kwok.log"), bin,
		"--kubeconfig="+kubeconfig, "--config="+strings.Join(stages, ","), "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokAnnotation+"=fake",
		"--cidr=10.0.0.0/8", "--node-ip=127.0.0.1", "--server-address=127.0.0.1:"+strconv.Itoa(ports[0]),
		"--node-lease-duration-seconds="+strconv.Itoa(int(lease.Seconds())))
}

// restartScheduler replaces the scheduler with one that scores percentage of the nodes
// (0: the default). Its log goes beside the first one's, named by the percentage.
func (c *Cluster) restartScheduler(ctx context.Context, percentage int) error {
	if peak, err := bench.ProcStatusMiB(c.sched.Pid(), "VmHWM"); err == nil {
		c.schedPeakMB = max(c.schedPeakMB, peak)
	}
	c.sched.Stop(ctx, 15*time.Second)
	name := fmt.Sprintf("scheduler-percentage-%d", percentage)
	sched, err := c.cp.StartScheduler(ctx, filepath.Join(c.work, name), filepath.Join(c.logs, name),
		controlplane.SchedulerConfig{Limits: schedulerLimits, PercentageOfNodesToScore: percentage})
	if err != nil {
		return fmt.Errorf("restart the scheduler with percentageOfNodesToScore %d: %w", percentage, err)
	}
	c.sched, c.percentage = sched, percentage
	return nil
}

// createAPIObjects creates the namespaces with their service accounts (no controller
// makes them here) and the DeviceClasses: the chart's default pools and the GPU class.
func (c *Cluster) createAPIObjects(ctx context.Context, repo string) error {
	kube := c.cp.Client
	for _, ns := range []string{loadNamespace, fillNamespace} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create the default service account of %s: %w", ns, err)
		}
	}
	classes, err := bench.DeviceClasses(repo)
	if err != nil {
		return err
	}
	classes[gpuClass] = &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: gpuClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", gpuDriver)}}}},
	}
	for _, dc := range classes {
		if _, err := kube.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create DeviceClass %s: %w", dc.Name, err)
		}
	}
	return nil
}

// createNodes creates n nodes, the profiles in turn, and waits until kwok reports every
// one Ready and the node lifecycle controller has lifted their not-ready taint.
func (c *Cluster) createNodes(ctx context.Context, n int) error {
	c.nodes = make([]*simNode, n)
	err := parallel(ctx, n, func(ctx context.Context, i int) error {
		k := c.kinds[i%len(c.kinds)]
		obj, err := c.cp.Client.CoreV1().Nodes().Create(ctx, nodeObject(nodeName(i), k), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", nodeName(i), err)
		}
		c.nodes[i] = &simNode{name: obj.Name, index: i, kind: k, obj: obj}
		return nil
	})
	if err != nil {
		return err
	}
	var ready int
	// kwok and the node lifecycle controller take longer the more nodes there are.
	timeout := max(5*time.Minute, time.Duration(n)*100*time.Millisecond)
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		ready = 0
		for _, node := range list.Items {
			for _, cond := range node.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue && len(node.Spec.Taints) == 0 {
					ready++
				}
			}
		}
		return ready == n, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d nodes Ready and untainted (kwok's and the controller manager's logs tell why): %w", ready, n, err)
	}
	return nil
}

// publishWorkers is how many nodes publish at once: each waits for the API server to
// have its slices.
const publishWorkers = 64

// publish makes every node publish model m and waits until the API server has each
// node's slices. The plugins of the nodes in pluginSample keep running, as on a
// cluster, for their traffic; the others' Publishers and ResourceSlice controllers are
// stopped once their slices are published, and the slices stay.
func (c *Cluster) publish(ctx context.Context, m Model) error {
	err := parallelN(ctx, len(c.nodes), publishWorkers, func(ctx context.Context, i int) error {
		n := c.nodes[i]
		if err := n.pub.publish(ctx, m); err != nil {
			return err
		}
		if !n.running {
			defer n.pub.stop()
		}
		return n.pub.sink.waitPublished(ctx, c.cp.Client)
	})
	if err != nil {
		return err
	}
	c.model = m
	return nil
}

// Stop stops the publishers, kwok and the control plane.
func (c *Cluster) Stop(ctx context.Context) {
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		if n.pub != nil {
			n.pub.sink.Stop()
		}
		if n.gpu != nil {
			n.gpu.Stop()
		}
	}
	if c.kwok != nil {
		c.kwok.Stop(ctx, 10*time.Second)
	}
	if c.cp != nil {
		c.cp.Stop(ctx)
	}
}
