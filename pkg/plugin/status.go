package plugin

import (
	"context"
	"encoding/json"
	"path"
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// ConditionReady is the condition the plugin sets on each device it prepared.
const ConditionReady = "Ready"

// DeviceData is the driver-specific data of a prepared device in the claim's
// status.devices[].data: what a workload or an operator needs to find the port.
type DeviceData struct {
	IBDev     string `json:"ibdev"`
	Port      int    `json:"port"`
	LinkLayer string `json:"link_layer,omitempty"`
	GIDIndex  *int   `json:"gid_index,omitempty"`
	Netdev    string `json:"netdev,omitempty"`
	// UVerbs is the path of the port's uverbs device inside the container.
	UVerbs string `json:"uverbs,omitempty"`
}

// statusQueueSize bounds the status updates waiting for the API server; beyond it
// updates are dropped with a log line (status is informational).
const statusQueueSize = 1024

// statusWriter writes status.devices of prepared claims with server-side apply, owned by
// the field manager of the driver's name, so that it neither races with nor overwrites
// other writers of the claim's status.
//
// Writes happen in the background (Run): a slow or rate-limited API server must not hold
// up a pod's start for a field that is for humans and tools. A crash may lose a queued
// update; the pod runs all the same.
type statusWriter struct {
	driverName      string
	kube            kubernetes.Interface
	clock           clock.PassiveClock
	forbiddenLogged atomic.Bool
	queue           chan statusJob
	// pending counts queued and running jobs, so that tests and benchmarks can wait
	// for the writer to be idle.
	pending sync.WaitGroup
}

type statusJob struct {
	claim    *resourceapi.ResourceClaim
	prepared []checkpoint.Device
	devices  []cdi.ClaimDevice
	at       metav1.Time
}

func newStatusWriter(driverName string, kube kubernetes.Interface, c clock.PassiveClock) *statusWriter {
	return &statusWriter{driverName: driverName, kube: kube, clock: c, queue: make(chan statusJob, statusQueueSize)}
}

// enqueue schedules the status of a prepared claim.
func (s *statusWriter) enqueue(ctx context.Context, claim *resourceapi.ResourceClaim, prepared []checkpoint.Device, devices []cdi.ClaimDevice) {
	if s.kube == nil || len(prepared) == 0 {
		return
	}
	job := statusJob{claim: claim, prepared: prepared, devices: devices, at: metav1.NewTime(s.clock.Now().Truncate(1e9))}
	s.pending.Add(1)
	select {
	case s.queue <- job:
	default:
		s.pending.Done()
		klog.FromContext(ctx).Error(nil, "Too many claim status updates pending, dropping one", "claim", klog.KObj(claim))
	}
}

// Run writes queued status updates until ctx ends.
func (s *statusWriter) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-s.queue:
			s.write(ctx, job)
			s.pending.Done()
		}
	}
}

// write applies the status of the claim's devices. Failures are logged only.
func (s *statusWriter) write(ctx context.Context, job statusJob) {
	claim, prepared, devices, now := job.claim, job.prepared, job.devices, job.at
	logger := klog.FromContext(ctx)
	status := resourceac.ResourceClaimStatus()
	for i, dev := range prepared {
		port := devices[i].Port
		data := DeviceData{IBDev: port.IBDev, Port: port.Port, LinkLayer: port.LinkLayer, GIDIndex: port.GIDIndex, Netdev: port.Netdev}
		if port.Verbs != nil {
			data.UVerbs = path.Join("/dev/infiniband", port.Verbs.Name)
		}
		raw, err := json.Marshal(data)
		if err != nil {
			logger.Error(err, "Encode device status data", "device", dev.Device)
			return
		}
		ds := resourceac.AllocatedDeviceStatus().
			WithDriver(s.driverName).
			WithPool(dev.Pool).
			WithDevice(dev.Device).
			WithConditions(metav1ac.Condition().
				WithType(ConditionReady).
				WithStatus(metav1.ConditionTrue).
				WithReason("Prepared").
				WithMessage("CDI spec written").
				WithObservedGeneration(claim.Generation).
				WithLastTransitionTime(now)).
			WithData(runtime.RawExtension{Raw: raw})
		if dev.ShareID != "" {
			ds = ds.WithShareID(dev.ShareID)
		}
		status = status.WithDevices(ds)
	}
	// The UID makes the apply fail instead of touching a claim that was deleted and
	// created again under the same name.
	ac := resourceac.ResourceClaim(claim.Name, claim.Namespace).WithUID(claim.UID).WithStatus(status)
	_, err := s.kube.ResourceV1().ResourceClaims(claim.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: s.driverName, Force: true})
	switch {
	case err == nil:
		logger.V(4).Info("Wrote claim device status", "claim", klog.KObj(claim), "devices", len(prepared))
	case apierrors.IsForbidden(err):
		// Logged once: without the permission every claim fails the same way.
		if !s.forbiddenLogged.Swap(true) {
			logger.Error(err, "Not allowed to write ResourceClaim device status; grant resourceclaims/status patch and resourceclaims/driver associated-node:patch (see docs/kubelet-plugin.md). Claims are still prepared.",
				"claim", klog.KObj(claim))
		}
	default:
		logger.Error(err, "Could not write ResourceClaim device status", "claim", klog.KObj(claim))
	}
}
