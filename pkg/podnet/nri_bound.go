package podnet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/stub"
	"k8s.io/klog/v2"
)

// How long the NRI side works on one request of the runtime.
//
// The runtime gives every NRI request a timeout: containerd 2.x's
// plugin_request_timeout, whose default is the NRI library's
// DefaultPluginRequestTimeout, 2 s (github.com/containerd/nri pkg/api/timeouts.go),
// and it tells the plugin the value in use when it configures it. A request that
// outlasts it is a fatal error of the plugin to the runtime (pkg/adaptation's
// isFatalError): the runtime closes the plugin's connection and goes on as if the plugin
// had answered, so the pod's sandbox or container starts without its attachment, and
// the plugin misses every event until it has reconnected.
//
// The node's side can take longer than that: an attach waits up to 2 s for the GID of
// the pod's address, the detach of a moved netdev up to 5 s for it to come back, and the
// pod's claims' locks may be held by the work of an earlier request. So the plugin
// answers within a budget below the runtime's timeout (requestBudget) and the work goes
// on in the background, bounded by maxPodWork. The answer is then a plain error, which
// the kubelet retries (RunPodSandbox, CreateContainer) or the runtime logs (stop,
// remove); the retry finds the work done, or waits for it on the claims' locks.

// maxPodWork bounds the work of one request that goes on after the answer, so that a
// netlink call that hangs does not hold the pod's claims for good.
const maxPodWork = 2 * time.Minute

// errStillWorking is the answer to a request whose work goes on in the background.
var errStillWorking = errors.New("still in progress, a retry finds it done")

// requestTimeout is the runtime's NRI request timeout as it configured the plugin, or
// the library's default before that.
func (n *NRIPlugin) requestTimeout() time.Duration {
	if d := time.Duration(n.timeout.Load()); d > 0 {
		return d
	}
	return stub.DefaultRequestTimeout
}

// requestBudget is how long the plugin works on a request before it answers: three
// quarters of the runtime's timeout, and of what is left of the request's deadline where
// the request has one, so that the answer is back before the runtime gives up.
func (n *NRIPlugin) requestBudget(ctx context.Context) time.Duration {
	budget := n.requestTimeout() * 3 / 4
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(deadline)*3/4)
	}
	return budget
}

// workContext is the context of work that may outlive the request ctx: the plugin's
// own (which ends with the process), with ctx's logger.
func (n *NRIPlugin) workContext(ctx context.Context) context.Context {
	base := n.base
	if base == nil {
		base = context.WithoutCancel(ctx)
	}
	return klog.NewContext(base, klog.FromContext(ctx))
}

// bounded runs work for a request, and answers with its result when it is done within
// the request's budget, or with errStillWorking while it goes on in the background.
func (n *NRIPlugin) bounded(ctx context.Context, what string, work func(context.Context) error) error {
	budget := n.requestBudget(ctx)
	workCtx, cancel := context.WithTimeout(n.workContext(ctx), maxPodWork)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- work(workCtx)
	}()
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	logger := klog.FromContext(ctx)
	logger.Info("Answering the runtime before its request timeout, the work goes on in the background",
		"work", what, "budget", budget, "requestTimeout", n.requestTimeout())
	go func() {
		if err := <-done; err != nil {
			logger.Error(err, "Background work of an answered request failed", "work", what)
			return
		}
		logger.V(2).Info("Background work of an answered request done", "work", what)
	}()
	return fmt.Errorf("%s: not done within %s (the runtime's request timeout is %s): %w", what, budget, n.requestTimeout(), errStillWorking)
}
