package scale

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// fillRequest is the request name of a filler claim.
const fillRequest = "fill"

// fill takes the share fill of every node's ports in the current model before pods are
// timed: per node one pod, bound by the harness, holding a claim allocated to whole ports
// (filledPorts) and the same share of the node's extended resource, so that both ways
// start equally full. A Running pod reserves the claim, as after a real scheduling.
func (c *Cluster) fill(ctx context.Context, fill float64) error {
	if fill == 0 {
		return nil
	}
	return parallel(ctx, len(c.nodes), func(ctx context.Context, i int) error {
		return c.fillNode(ctx, c.nodes[i], fill)
	})
}

func (c *Cluster) fillNode(ctx context.Context, n *simNode, fill float64) error {
	ports := filledPorts(n.kind, n.index, fill)
	if len(ports) == 0 {
		return nil
	}
	devices, shares := fillDevices(n.kind.catalog[c.model], n.kind.catalog[ModelDefault], c.model, ports)
	driver := devicemodel.DefaultDriverName
	pool := devicemodel.DefaultPoolName(n.name, driver)
	kube := c.cp.Client
	// A claim holds at most resourceapi.AllocationResultsMaxSize devices (the legacy
	// model's ports have 16 share devices each): the pod holds as many claims as needed.
	chunks := slices.Collect(slices.Chunk(devices, resourceapi.AllocationResultsMaxSize))
	var claims []*resourceapi.ResourceClaim
	var podClaims []v1.PodResourceClaim
	var containerClaims []v1.ResourceClaim
	for i, chunk := range chunks {
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fill-%s-%d", n.name, i), Namespace: fillNamespace},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
				exact(fillRequest, exclusiveClass, int64(len(chunk))),
			}}},
		}
		claim, err := kube.ResourceV1().ResourceClaims(fillNamespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create filler claim of %s: %w", n.name, err)
		}
		claims = append(claims, claim)
		ref := fmt.Sprintf("fill-%d", i)
		podClaims = append(podClaims, v1.PodResourceClaim{Name: ref, ResourceClaimName: &claim.Name})
		containerClaims = append(containerClaims, v1.ResourceClaim{Name: ref})
	}
	zero := int64(0)
	er := *apiresource.NewQuantity(int64(shares), apiresource.DecimalSI)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fill-" + n.name, Namespace: fillNamespace},
		Spec: v1.PodSpec{
			NodeName: n.name, TerminationGracePeriodSeconds: &zero, ResourceClaims: podClaims,
			Containers: []v1.Container{{Name: "fill", Image: "registry.invalid/scale/fill:none", Resources: v1.ResourceRequirements{
				Claims: containerClaims,
				Limits: v1.ResourceList{ExtendedResource: er}, Requests: v1.ResourceList{ExtendedResource: er},
			}}},
		},
	}
	pod, err := kube.CoreV1().Pods(fillNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create filler pod of %s: %w", n.name, err)
	}
	for i, chunk := range chunks {
		results := make([]resourceapi.DeviceRequestAllocationResult, 0, len(chunk))
		for _, d := range chunk {
			results = append(results, resourceapi.DeviceRequestAllocationResult{Request: fillRequest, Driver: driver, Pool: pool, Device: d})
		}
		claim := claims[i]
		claim.Status = resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: results},
				NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{n.name},
				}}}}},
			},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
		}
		if _, err := kube.ResourceV1().ResourceClaims(fillNamespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("allocate filler claim %s: %w", claim.Name, err)
		}
	}
	return nil
}

// fillDevices are the devices of model m (its catalog) that take ports whole, and the
// shares those ports have in the default model def (the extended resource the filler pod
// holds).
func fillDevices(catalog, def map[string]devicemodel.Device, m Model, ports []string) (devices []string, shares int) {
	for name, d := range catalog {
		if !slices.Contains(ports, d.PortKey) {
			continue
		}
		// A port is taken whole by its exclusive device, or in the legacy model by all
		// its single-share devices.
		if d.Mode == devicemodel.ModeExclusive || m == ModelLegacy {
			devices = append(devices, name)
		}
	}
	for _, d := range def {
		if d.Mode == devicemodel.ModeShared && slices.Contains(ports, d.PortKey) {
			shares += d.MaxShares
		}
	}
	slices.Sort(devices)
	return devices, shares
}

// unfill deletes the filler pods and claims and waits until they are gone.
func (c *Cluster) unfill(ctx context.Context) error {
	return c.emptyNamespace(ctx, fillNamespace)
}

// emptyNamespace deletes every pod of ns, then every claim, and waits until none is
// left: the scheduler's view of the cluster is back to what it was. Each object is
// deleted on its own, in parallel: a DeleteCollection of 5,000 pods outlasts the API
// server's request timeout.
func (c *Cluster) emptyNamespace(ctx context.Context, ns string) error {
	pods := c.cp.Client.CoreV1().Pods(ns)
	if err := deleteEach(ctx, "pods of "+ns, pageOf(pods.List), pods.Delete); err != nil {
		return err
	}
	claims := c.cp.Client.ResourceV1().ResourceClaims(ns)
	return deleteEach(ctx, "claims of "+ns, pageOf(claims.List), claims.Delete)
}

// pageOf makes a typed List call a listPage.
func pageOf[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) listPage {
	return func(ctx context.Context, opts metav1.ListOptions) ([]string, string, error) {
		l, err := list(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, "", err
		}
		names := make([]string, 0, len(items))
		for _, item := range items {
			obj, err := meta.Accessor(item)
			if err != nil {
				return nil, "", err
			}
			names = append(names, obj.GetName())
		}
		lm, err := meta.ListAccessor(l)
		if err != nil {
			return nil, "", err
		}
		return names, lm.GetContinue(), nil
	}
}

// listPage lists one page of names and the continue token of the next.
type listPage func(ctx context.Context, opts metav1.ListOptions) (names []string, next string, err error)

// deleteEach deletes every object list names, at once and in parallel, then waits until
// the list is empty (a claim stays until the controller manager removes its finalizer).
func deleteEach(ctx context.Context, what string, list listPage, del func(context.Context, string, metav1.DeleteOptions) error) error {
	var names []string
	opts := metav1.ListOptions{Limit: 500}
	for {
		page, next, err := list(ctx, opts)
		if err != nil {
			return fmt.Errorf("list the %s: %w", what, err)
		}
		names = append(names, page...)
		if opts.Continue = next; next == "" {
			break
		}
	}
	delOpts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	err := parallel(ctx, len(names), func(ctx context.Context, i int) error {
		if err := del(ctx, names[i], delOpts); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s of the %s: %w", names[i], what, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var left int
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		page, _, err := list(ctx, metav1.ListOptions{Limit: 1})
		left = len(page)
		return err == nil && left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the %s are not all gone (claims wait for the controller manager to remove their finalizer): %w", what, err)
	}
	return nil
}
