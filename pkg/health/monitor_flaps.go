package health

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// Node event reasons of the flapping check.
const (
	ReasonPortFlapping = "RDMAPortFlapping"
	ReasonPortSteady   = "RDMAPortSteady"
)

// publishedPorts returns the ports the models publish, each once, in port order: the
// ports whose counters are read and whose devices a flapping taint would go to.
func publishedPorts(models []*devicemodel.Result) []portcounters.Port {
	seen := map[PortID]bool{}
	var ports []discovery.Port
	for _, r := range models {
		if r == nil {
			continue
		}
		for _, d := range r.Devices {
			for _, p := range d.AllPorts() {
				if id := (PortID{p.IBDev, p.Port}); !seen[id] {
					seen[id] = true
					ports = append(ports, p)
				}
			}
		}
	}
	slices.SortFunc(ports, discovery.ComparePorts)
	out := make([]portcounters.Port, len(ports))
	for i, p := range ports {
		out[i] = portcounters.Port{IBDev: p.IBDev, Port: p.Port, LinkLayer: p.LinkLayer}
	}
	return out
}

// Flapping returns the ports that flap now and the value of their taint, for the device
// model (devicemodel.Options.Flapping). It is safe to call while the monitor runs.
func (m *Monitor) Flapping() map[devicemodel.PortID]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return toModel(m.flaps.Flapping())
}

// initFlapGauges gives every published port a port_flapping series, 0 until it flaps.
func (m *Monitor) initFlapGauges(ports []portcounters.Port) {
	if m.opts.Metrics == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ports {
		id := PortID{p.IBDev, p.Port}
		if _, ok := m.flapGauges[id]; !ok {
			m.flapGauges[id] = false
			m.opts.Metrics.SetPortFlapping(id.IBDev, id.Port, false)
		}
	}
}

// pollFlaps reads link_downed and symbol_error of the published ports, logs the ports
// that started or stopped flapping (with a Node event and the gauge), and returns, as a
// poll's changes, why the slices must be republished: the flapping ports differ from
// those the published slices were built with.
func (m *Monitor) pollFlaps(logger klog.Logger, now time.Time) []string {
	if m.opts.Counters == nil || !m.opts.Flapping.Enabled() {
		return nil
	}
	readings := m.opts.Counters.ReadLinkErrors()
	m.mu.Lock()
	changes := m.flaps.Observe(now, readings)
	differs := !equalFlaps(m.flaps.Flapping(), m.published)
	for _, c := range changes {
		if m.opts.Metrics != nil {
			m.flapGauges[c.Port] = c.Value != ""
			m.opts.Metrics.SetPortFlapping(c.Port.IBDev, c.Port.Port, c.Value != "")
		}
	}
	m.mu.Unlock()

	var reasons []string
	for _, c := range changes {
		msg := c.describe(m.opts.Flapping)
		reasons = append(reasons, msg)
		logger.Info("RDMA port flapping changed", "ibdev", c.Port.IBDev, "port", c.Port.Port, "flapping", c.Value, "was", c.Was,
			"linkDownedInWindow", c.LinkDowned, "symbolErrorsInWindow", c.SymbolErrors, "window", m.opts.Flapping.Window)
		if m.opts.Recorder != nil {
			eventType, reason := corev1.EventTypeWarning, ReasonPortFlapping
			if c.Value == "" {
				eventType, reason = corev1.EventTypeNormal, ReasonPortSteady
			}
			m.opts.Recorder.Eventf(m.node, eventType, reason, "%s", msg)
		}
	}
	if differs && len(reasons) == 0 {
		reasons = append(reasons, "flapping ports differ from the published ones")
	}
	if !differs {
		return nil
	}
	return reasons
}
