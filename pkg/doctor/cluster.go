package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// Names of the cluster checks, reported after the runtime's when Host.Cluster is set;
// CheckCluster is the one SKIP in their place with Host.ClusterSkipped.
const (
	CheckCluster           = "cluster"
	CheckKubernetesVersion = "kubernetes-version"
	CheckDRAAPI            = "dra-api"
	CheckKubeletVersion    = "kubelet-version"
	CheckDeviceModel       = "device-model"
)

// MinKubernetes is the oldest Kubernetes the driver supports: resource.k8s.io/v1 is
// served from 1.34 on (README, Requirements).
var MinKubernetes = kversion.MajorMinor(1, 34)

// Cluster is what the cluster checks ask: the API server, as this node's kubelet and
// the driver's plugin see it.
type Cluster struct {
	// Client talks to the API server; the checks read, and create ResourceSlices only
	// as a server-side dry run (nothing is stored).
	Client kubernetes.Interface
	// Node is this node's name in the cluster.
	Node string
	// DriverName names the driver in the dry-run slices (default rdma.dra.io).
	DriverName string
}

// runCluster runs the cluster checks; the device model check uses Run's inventory.
func runCluster(ctx context.Context, e *env, c *Cluster) []Result {
	server, serverVersion := checkKubernetesVersion(c)
	return []Result{
		server,
		checkDRAAPI(c),
		checkKubeletVersion(ctx, c, serverVersion),
		checkDeviceModel(ctx, e, c),
	}
}

// checkKubernetesVersion also returns the API server's version, nil when unknown.
func checkKubernetesVersion(c *Cluster) (Result, *kversion.Version) {
	r := Result{Check: CheckKubernetesVersion}
	info, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		r.Status, r.Found = Fail, fmt.Sprintf("the API server's version cannot be read: %v", err)
		r.Fix = "Check the kubeconfig (--kubeconfig) and that the API server is reachable from this node."
		return r, nil
	}
	v, err := kversion.ParseGeneric(info.GitVersion)
	if err != nil {
		r.Status, r.Found = Warn, fmt.Sprintf("API server version %q cannot be parsed: %v", info.GitVersion, err)
		r.Fix = fmt.Sprintf("Make sure the cluster runs Kubernetes %s or newer.", MinKubernetes)
		return r, nil
	}
	if v.LessThan(MinKubernetes) {
		r.Status, r.Found = Fail, fmt.Sprintf("API server %s", info.GitVersion)
		r.Fix = fmt.Sprintf("Upgrade the control plane to Kubernetes %s or newer: the driver needs resource.k8s.io/v1.", MinKubernetes)
		return r, v
	}
	r.Status, r.Found = OK, fmt.Sprintf("API server %s (%s or newer)", info.GitVersion, MinKubernetes)
	return r, v
}

func checkDRAAPI(c *Cluster) Result {
	r := Result{Check: CheckDRAAPI}
	groups, err := c.Client.Discovery().ServerGroups()
	if err != nil {
		r.Status, r.Found = Fail, fmt.Sprintf("the API server's groups cannot be read: %v", err)
		r.Fix = "Check the kubeconfig and that its user may read the discovery documents."
		return r
	}
	var served []string
	for _, g := range groups.Groups {
		if g.Name != resourceapi.GroupName {
			continue
		}
		for _, v := range g.Versions {
			served = append(served, v.Version)
		}
	}
	slices.Sort(served)
	switch {
	case slices.Contains(served, resourceapi.SchemeGroupVersion.Version):
		r.Status, r.Found = OK, fmt.Sprintf("%s served (versions %s)", resourceapi.SchemeGroupVersion, strings.Join(served, ", "))
	case len(served) > 0:
		r.Status, r.Found = Fail, fmt.Sprintf("%s serves only %s", resourceapi.GroupName, strings.Join(served, ", "))
		r.Fix = fmt.Sprintf("Serve %s: Kubernetes %s or newer serves it by default; an API server started with --runtime-config that turns it off must turn it on again.", resourceapi.SchemeGroupVersion, MinKubernetes)
	default:
		r.Status, r.Found = Fail, fmt.Sprintf("%s is not served: dynamic resource allocation is off", resourceapi.GroupName)
		r.Fix = fmt.Sprintf("Run Kubernetes %s or newer with %s enabled (on by default; --runtime-config of the API server).", MinKubernetes, resourceapi.SchemeGroupVersion)
	}
	return r
}

func checkKubeletVersion(ctx context.Context, c *Cluster, server *kversion.Version) Result {
	r := Result{Check: CheckKubeletVersion}
	if c.Node == "" {
		r.Status, r.Found = Skip, "no node name (pass --node)"
		return r
	}
	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
	if err != nil {
		r.Status, r.Found = Fail, fmt.Sprintf("node %s: %v", c.Node, err)
		r.Fix = "Pass this node's name as it is registered (--node, env NODE_NAME; default: the host name)."
		if apierrors.IsForbidden(err) {
			r.Status, r.Found, r.Fix = Skip, fmt.Sprintf("node %s may not be read with this kubeconfig: %v", c.Node, err), ""
		}
		return r
	}
	kv := node.Status.NodeInfo.KubeletVersion
	v, err := kversion.ParseGeneric(kv)
	if err != nil {
		r.Status, r.Found = Warn, fmt.Sprintf("node %s reports kubelet version %q, which cannot be parsed: %v", c.Node, kv, err)
		r.Fix = fmt.Sprintf("Make sure the node's kubelet is Kubernetes %s or newer.", MinKubernetes)
		return r
	}
	switch {
	case v.LessThan(MinKubernetes):
		r.Status, r.Found = Fail, fmt.Sprintf("kubelet %s on node %s", kv, c.Node)
		r.Fix = fmt.Sprintf("Upgrade the node to Kubernetes %s or newer: older kubelets do not speak the DRA API the plugin serves.", MinKubernetes)
	case server != nil && v.WithPatch(0).GreaterThan(server.WithPatch(0)):
		r.Status, r.Found = Fail, fmt.Sprintf("kubelet %s on node %s is newer than the API server %s", kv, c.Node, server)
		r.Fix = "Upgrade the control plane first: a kubelet must not be newer than its API server (Kubernetes version skew policy)."
	default:
		r.Status, r.Found = OK, fmt.Sprintf("kubelet %s on node %s", kv, c.Node)
	}
	return r
}

// checkDeviceModel creates the node's ResourceSlices of the partitionable model as a
// server-side dry run and looks at what the API server kept: without the
// DRAPartitionableDevices or DRAConsumableCapacity features it drops the counters or the
// multi-allocation fields, and the plugin (deviceModel auto) publishes the legacy model.
func checkDeviceModel(ctx context.Context, e *env, c *Cluster) Result {
	r := Result{Check: CheckDeviceModel}
	if e.inv == nil {
		return e.noInventory(r.Check)
	}
	if c.Node == "" {
		r.Status, r.Found = Skip, "no node name (pass --node)"
		return r
	}
	driver := c.DriverName
	if driver == "" {
		driver = devicemodel.DefaultDriverName
	}
	built, err := devicemodel.Build(e.inv, devicemodel.Options{DriverName: driver, NodeName: c.Node})
	if err != nil {
		r.Status, r.Found = Skip, fmt.Sprintf("the node's devices cannot be modelled: %v", err)
		return r
	}
	sent := built.ResourceSlices()
	if len(built.Devices) == 0 || len(sent) == 0 {
		r.Status, r.Found = Skip, "no RDMA port to publish on this node"
		return r
	}
	var dropped []string
	for _, s := range sent {
		s.GenerateName, s.Name = s.Name+"-doctor-", ""
		got, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			r.Status, r.Found = Skip, fmt.Sprintf("a dry-run create of the node's ResourceSlices was refused: %v", err)
			if !apierrors.IsForbidden(err) {
				r.Status, r.Fix = Warn, "A cluster admin's kubeconfig may create ResourceSlices; the dry run stores nothing."
			}
			return r
		}
		dropped = append(dropped, droppedFields(s, got)...)
	}
	slices.Sort(dropped)
	dropped = slices.Compact(dropped)
	if len(dropped) == 0 {
		r.Status = OK
		r.Found = fmt.Sprintf("partitionable: the API server keeps the shared counters and multi-allocation of %d devices in %d slices, so a port is published whole and in shares, and the scheduler hands it out one way at a time", len(built.Devices), len(sent))
		return r
	}
	r.Status = Warn
	r.Found = fmt.Sprintf("legacy: the API server drops %s, so the plugin (deviceModel auto) publishes the legacy model: each port either whole (legacy.mode exclusive) or as a fixed number of single-share devices, one of the two per node", strings.Join(dropped, ", "))
	r.Fix = "Enable the DRAPartitionableDevices and DRAConsumableCapacity feature gates on the API server, the scheduler and the kubelets (on by default from Kubernetes 1.36), or keep the legacy model (docs/device-model.md)."
	return r
}

// droppedFields names the partitionable model's fields that sent has and got lacks.
func droppedFields(sent, got *resourceapi.ResourceSlice) []string {
	var out []string
	if len(sent.Spec.SharedCounters) > 0 && len(got.Spec.SharedCounters) == 0 {
		out = append(out, "spec.sharedCounters (DRAPartitionableDevices)")
	}
	byName := map[string]resourceapi.Device{}
	for _, d := range got.Spec.Devices {
		byName[d.Name] = d
	}
	for _, d := range sent.Spec.Devices {
		g := byName[d.Name]
		if len(d.ConsumesCounters) > 0 && len(g.ConsumesCounters) == 0 {
			out = append(out, "devices[].consumesCounters (DRAPartitionableDevices)")
		}
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations && (g.AllowMultipleAllocations == nil || !*g.AllowMultipleAllocations) {
			out = append(out, "devices[].allowMultipleAllocations (DRAConsumableCapacity)")
		}
		for name, c := range d.Capacity {
			if c.RequestPolicy != nil && g.Capacity[name].RequestPolicy == nil {
				out = append(out, "devices[].capacity[].requestPolicy (DRAConsumableCapacity)")
			}
		}
	}
	return out
}
