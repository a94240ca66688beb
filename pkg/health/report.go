package health

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// Health stream timing. The kubelet treats a device's health as unknown when it was not
// refreshed within its HealthCheckTimeout; the complete report is re-sent every
// ResendInterval, so two reports may be lost before that happens.
const (
	ResendInterval     = 10 * time.Second
	HealthCheckTimeout = 3 * ResendInterval
)

// Bounds of the removed devices a Reporter keeps reporting. A device that left the node
// is reported Unhealthy for GoneRetention, so that the pods that held it say so; after
// that it is no longer reported and the kubelet decays its health to Unknown
// (HealthCheckTimeout), which still is not Healthy. At most MaxGone are kept, the
// longest gone dropped first, so that names that keep changing (a flapping adapter that
// comes back under another ibdev name, a changing node configuration) cannot grow the
// set, and every report, without bound.
const (
	GoneRetention = time.Hour
	MaxGone       = 4096
)

// deviceRef is one published device and the port it hands out.
type deviceRef struct {
	pool, name string
	port       PortID
}

func compareDeviceRefs(a, b deviceRef) int {
	return cmp.Or(cmp.Compare(a.pool, b.pool), cmp.Compare(a.name, b.name))
}

// Reporter holds the health of every published device and streams it to the kubelet.
// Port states come from the poller (every poll), device names from the device models
// (every scan), so health is reported as soon as a poll sees a change, before the slices
// are republished and whatever the damping.
//
// Invariant: devices is sorted and holds each (pool, name) once; gone holds devices that
// were published and are not anymore, with the time they went, reported unhealthy so that
// a pod whose device was removed says so; it is disjoint from devices and bounded by
// GoneRetention and MaxGone.
type Reporter struct {
	clock clock.WithTicker

	mu       sync.Mutex
	devices  []deviceRef
	gone     map[deviceRef]time.Time
	states   map[PortID]PortState
	verified time.Time
	// changed is closed, and replaced, whenever the health of a device changes.
	changed chan struct{}
}

// NewReporter returns a reporter without devices.
func NewReporter(c clock.WithTicker) *Reporter {
	return &Reporter{clock: c, gone: map[deviceRef]time.Time{}, states: map[PortID]PortState{}, changed: make(chan struct{})}
}

// SetDevices replaces the devices with those of the models: the published one and the
// other, whose devices claims allocated before a change of model still hold.
func (r *Reporter) SetDevices(models ...*devicemodel.Result) {
	seen := map[deviceRef]bool{}
	var devices []deviceRef
	for _, m := range models {
		if m == nil {
			continue
		}
		for name, d := range m.Devices {
			ref := deviceRef{pool: m.PoolName, name: name, port: PortID{d.Port.IBDev, d.Port.Port}}
			if !seen[ref] {
				seen[ref] = true
				devices = append(devices, ref)
			}
		}
	}
	slices.SortFunc(devices, compareDeviceRefs)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	for _, old := range r.devices {
		if !seen[old] {
			r.gone[old] = now
		}
	}
	for ref := range seen {
		delete(r.gone, ref)
	}
	r.pruneGone(now)
	if !slices.Equal(devices, r.devices) {
		r.devices = devices
		r.notify()
	}
}

// SetStates records the ports' states as verified at t. Ports missing from states keep
// theirs.
func (r *Reporter) SetStates(states map[PortID]PortState, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for id, s := range states {
		if old, ok := r.states[id]; !ok || old != s {
			r.states[id] = s
			changed = true
		}
	}
	r.verified = t
	if changed {
		r.notify()
	}
}

// Verified returns when the states were last verified.
func (r *Reporter) Verified() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.verified
}

// pruneGone drops removed devices gone longer than GoneRetention and, beyond MaxGone,
// the longest gone; r.mu is held.
func (r *Reporter) pruneGone(now time.Time) {
	for ref, t := range r.gone {
		if now.Sub(t) > GoneRetention {
			delete(r.gone, ref)
		}
	}
	if len(r.gone) <= MaxGone {
		return
	}
	refs := make([]deviceRef, 0, len(r.gone))
	for ref := range r.gone {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b deviceRef) int {
		return cmp.Or(r.gone[a].Compare(r.gone[b]), compareDeviceRefs(a, b))
	})
	for _, ref := range refs[:len(refs)-MaxGone] {
		delete(r.gone, ref)
	}
}

// notify wakes the streams; r.mu is held.
func (r *Reporter) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Report returns the health of every device, whether the states are fresh enough to
// vouch for (verified within HealthCheckTimeout), and a channel closed at the next change.
func (r *Reporter) Report() (kubeletplugin.DeviceHealthReport, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneGone(r.clock.Now())
	report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(r.devices)+len(r.gone))}
	add := func(ref deviceRef, health kubeletplugin.HealthStatus, msg string) {
		report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
			PoolName: ref.pool, DeviceName: ref.name, Health: health, Message: msg,
			LastUpdated: r.verified, HealthCheckTimeout: HealthCheckTimeout,
		})
	}
	for _, ref := range r.devices {
		s, ok := r.states[ref.port]
		switch {
		case !ok:
			add(ref, kubeletplugin.HealthStatusUnknown, ref.port.String()+" has not been read yet")
		case s.Healthy():
			add(ref, kubeletplugin.HealthStatusHealthy, ref.port.String()+" is "+s.String())
		default:
			add(ref, kubeletplugin.HealthStatusUnhealthy, ref.port.String()+" is "+s.String())
		}
	}
	gone := make([]deviceRef, 0, len(r.gone))
	for ref := range r.gone {
		gone = append(gone, ref)
	}
	slices.SortFunc(gone, compareDeviceRefs)
	for _, ref := range gone {
		add(ref, kubeletplugin.HealthStatusUnhealthy, ref.port.String()+" is no longer on the node")
	}
	fresh := !r.verified.IsZero() && r.clock.Since(r.verified) <= HealthCheckTimeout
	return report, fresh, r.changed
}

// Watch implements the kubelet's health stream: the complete report at once, then on
// every change and every ResendInterval, until ctx ends. It may run several times at
// once (the kubelet reconnects). States that were not verified within HealthCheckTimeout
// (the poller is stuck or fails) are not re-sent, so that the kubelet decays them to
// unknown rather than trusting them.
func (r *Reporter) Watch(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	logger := klog.FromContext(ctx)
	ticker := r.clock.NewTicker(ResendInterval)
	defer ticker.Stop()
	staleLogged := false
	for {
		report, fresh, changed := r.Report()
		if fresh {
			staleLogged = false
			select {
			case <-ctx.Done():
				return nil
			case reports <- report:
			}
		} else if !staleLogged {
			staleLogged = true
			logger.Error(nil, "Port states were not read recently, not vouching for device health", "timeout", HealthCheckTimeout)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-ticker.C():
		}
	}
}
