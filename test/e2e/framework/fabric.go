package framework

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The binding conditions of a device whose port the node configuration gates on fabric
// readiness (pkg/devicemodel).
const (
	FabricReady  = "rdma.dra.io/FabricReady"
	FabricFailed = "rdma.dra.io/FabricFailed"
)

// portFile is a file of a port's directory in the mock sysfs on the host.
func (e *Env) portFile(ibdev string, port int, name string) string {
	return filepath.Join(e.paths().SysRoot, "class", "infiniband", ibdev, "ports", strconv.Itoa(port), name)
}

// SetPKey writes key (0x8002) into entry index of the port's P_Key table in the mock
// sysfs, as the subnet manager would by adding the port to a partition.
func (e *Env) SetPKey(ibdev string, port, index int, key string) error {
	h, err := e.host()
	if err != nil {
		return err
	}
	if err := h.WriteFile(e.portFile(ibdev, port, filepath.Join("pkeys", strconv.Itoa(index))), []byte(key+"\n")); err != nil {
		return fmt.Errorf("write P_Key %d of %s port %d: %w", index, ibdev, port, err)
	}
	return nil
}

// RemovePKey removes entry index of the port's P_Key table in the mock sysfs; one that
// is not there is no error.
func (e *Env) RemovePKey(ibdev string, port, index int) error {
	h, err := e.host()
	if err != nil {
		return err
	}
	err = h.Remove(e.portFile(ibdev, port, filepath.Join("pkeys", strconv.Itoa(index))))
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !strings.Contains(err.Error(), "no such file") {
		return fmt.Errorf("remove P_Key %d of %s port %d: %w", index, ibdev, port, err)
	}
	return nil
}

// FabricConditions returns "Type=Status: Message" of the fabric conditions in the
// claim's status entries of the driver.
func FabricConditions(c *resourceapi.ResourceClaim) []string {
	var out []string
	for _, ds := range c.Status.Devices {
		if ds.Driver != DriverName {
			continue
		}
		for _, cond := range ds.Conditions {
			if cond.Type == FabricReady || cond.Type == FabricFailed {
				out = append(out, fmt.Sprintf("%s %s=%s: %s", ds.Device, strings.TrimPrefix(cond.Type, "rdma.dra.io/"), cond.Status, cond.Message))
			}
		}
	}
	return out
}

// errBound ends a wait for a pod that must stay unbound.
var errBound = errors.New("pod was bound to a node; want it waiting for its binding conditions")

// WaitHeldAtBinding waits until the pod's claim "rdma" is allocated with the fabric
// binding conditions and reserved for the pod while the pod has no node (the scheduler
// waits in PreBind), and until the gate, or the scheduler's failure event, says why with
// a message containing why. It fails the test when the pod gets a node meanwhile.
func (e *Env) WaitHeldAtBinding(ctx context.Context, ns, pod string, timeout time.Duration, why string) (*resourceapi.ResourceClaim, error) {
	var claim *resourceapi.ResourceClaim
	var last error
	err := Poll(ctx, timeout, 500*time.Millisecond, func(ctx context.Context) error {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			last = fmt.Errorf("%w: on %s", errBound, p.Spec.NodeName)
			return nil // ends the poll; reported below
		}
		name := ""
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == "rdma" && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
			}
		}
		if name == "" {
			return errors.New("no claim generated yet")
		}
		c, err := e.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		claim = c
		if c.Status.Allocation == nil {
			return errors.New("claim not allocated (yet, or again after a failed binding)")
		}
		gated := false
		for _, r := range c.Status.Allocation.Devices.Results {
			gated = gated || (len(r.BindingConditions) == 1 && r.BindingConditions[0] == FabricReady)
		}
		if !gated {
			return fmt.Errorf("allocation %v carries no %s binding condition", AllocatedDevices(c), FabricReady)
		}
		for _, cond := range FabricConditions(c) {
			if strings.Contains(cond, why) {
				return nil
			}
		}
		// The conditions of an allocation whose binding failed are cleared when the
		// scheduler deallocates it; its event keeps the message.
		events, err := e.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == pod && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, why) {
				return nil
			}
		}
		return fmt.Errorf("claim %s: fabric conditions %q, no event either, want one saying %q", c.Name, FabricConditions(c), why)
	})
	if last != nil {
		return claim, last
	}
	return claim, err
}

// MockSysRoot is the mock node's sysfs tree on the host, which a pod can mount; "" without
// access to the host.
func (e *Env) MockSysRoot() string { return e.paths().SysRoot }
