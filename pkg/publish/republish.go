package publish

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
)

// Trigger says when to look at the node again: its channel receives a signal when a
// rescan is due or something changed; *health.Monitor implements it.
type Trigger interface {
	C() <-chan health.Signal
}

// triggerFallback is the republish_total label of a switch to the legacy model.
const triggerFallback = "fallback"

// Run scans and republishes whenever trigger fires or the model must change, until ctx
// ends. Republishing is damped by the limiter: a signal that arrives when the budget is
// spent is held (later ones merge into it) and served when the limiter allows, by a scan
// of the node as it is then, so the last state always wins. A model fallback is never
// held back.
func (p *Publisher) Run(ctx context.Context, trigger Trigger) {
	logger := klog.FromContext(ctx)
	var (
		pending bool
		next    health.Signal
		wait    clock.Timer
		waitC   <-chan time.Time
	)
	defer func() {
		if wait != nil {
			wait.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-trigger.C():
			if pending {
				next = health.Merge(next, s)
			} else {
				next, pending = s, true
			}
		case <-p.fallback:
			p.republish(ctx, health.Signal{Source: triggerFallback, Reason: "switch to the legacy model"})
			continue
		case <-waitC:
			wait, waitC = nil, nil
		}
		if !pending || waitC != nil {
			continue
		}
		if d := p.limiter.Delay(); d > 0 {
			p.metrics.RepublishDamped()
			logger.V(2).Info("Damping republish", "reason", next.Reason, "for", d)
			wait = p.clock.NewTimer(d)
			waitC = wait.C()
			continue
		}
		pending = false
		p.republish(ctx, next)
	}
}

// republish scans for s and records what it caused.
func (p *Publisher) republish(ctx context.Context, s health.Signal) {
	logger := klog.FromContext(ctx)
	published, err := p.sync(ctx)
	if err != nil {
		logger.Error(err, "Updating ResourceSlices failed, retrying at the next change or rescan", "trigger", s.Source)
		return
	}
	if !published {
		return
	}
	p.limiter.Take()
	p.metrics.Republished(s.Source)
	// Only a noticed change has a moment to measure from; a rescan or a fallback not.
	if s.Source == health.SourcePoll || s.Source == health.SourceNetlink {
		latency := p.clock.Since(s.At)
		p.metrics.ObserveRepublishLatency(latency)
		logger.V(1).Info("Republished ResourceSlices", "trigger", s.Source, "reason", s.Reason, "latency", latency)
		return
	}
	logger.V(1).Info("Republished ResourceSlices", "trigger", s.Source, "reason", s.Reason)
}
