package plugin

import (
	"context"
	"errors"
	"net"
	"strconv"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"
)

// Run runs the kubelet plugin until ctx ends or an error stops it: it builds the
// components (build.go), runs their long-lived parts in one errgroup until ctx ends or
// one of them fails, and on a clean stop cleans the node up if the plugin is being
// uninstalled.
func Run(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger.Info("Starting kubelet plugin", cfg.KeysAndValues()...)
	// The plugin's lifetime: the driver ends it early with an error that retrying cannot
	// fix (DriverOptions.Fatal).
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	c := newComponents(cfg, stop)
	// The helper is nil until build started it; Stop on nil does nothing and Stop after
	// Stop waits for nothing.
	defer func() { c.helper.Stop() }()
	if err := c.build(ctx); err != nil {
		return err
	}
	return c.run(ctx)
}

// run runs the long-lived parts of the built components in one errgroup and waits until
// ctx ends or a part fails. Then the helper stops first (the kubelet no longer calls),
// run waits for every part to return, and only on a clean stop (ctx canceled without an
// error) does it look whether the plugin is being uninstalled. It returns the first
// error: a part's (liveness or metrics server), or the one the driver stopped ctx with.
//
// The loops only log their errors and retry (monitor, publisher, cleanup, claim status,
// fabric gate, NRI); the servers return theirs, which stops the plugin.
func (c *components) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	g, gctx := errgroup.WithContext(ctx)
	loop := func(run func(context.Context)) {
		g.Go(func() error {
			run(gctx)
			return nil
		})
	}
	if c.cfg.ReadyFile != "" {
		loop(func(ctx context.Context) { KeepReadyFile(ctx, c.cfg.ReadyFile, c.helper) })
	}
	loop(c.monitor.Run)
	loop(func(ctx context.Context) { c.publisher.Run(ctx, c.monitor) })
	loop(func(ctx context.Context) { c.driver.RunCleanup(ctx, c.clock, c.cfg.CleanupInterval) })
	loop(c.driver.RunStatusWriter)
	if c.fabricGate != nil {
		loop(c.fabricGate.Run)
	}
	if nri := c.driver.NetworkAttachment(); nri != nil {
		loop(func(ctx context.Context) { nri.RunNRI(ctx, nriPluginName(c.cfg)) })
	}
	if c.cfg.HealthcheckPort >= 0 {
		// The chart's probe names the host (127.0.0.1): with hostNetwork the kubelet
		// shares the plugin's network namespace, and nothing else needs the port.
		addr := net.JoinHostPort(c.cfg.HealthcheckBindAddress, strconv.Itoa(c.cfg.HealthcheckPort))
		g.Go(func() error { return ServeLiveness(gctx, addr, c.helper) })
	}
	if c.cfg.MetricsAddress != "" {
		g.Go(func() error { return serveMetrics(gctx, c.cfg, c.metrics.Handler()) })
	}
	logger.Info("Kubelet plugin is running")

	<-gctx.Done()
	// The first reason the plugin stops: ctx's end, the driver's error, or the first
	// error of a part (errgroup cancels gctx with it).
	cause := context.Cause(gctx)
	stopped := errors.Is(cause, context.Canceled)
	if stopped {
		logger.Info("Shutting down")
	}
	c.helper.Stop()
	// When a part failed first, Wait's error is cause. An error after a clean stop (a
	// server that could no longer listen because ctx had ended) does not make the stop a
	// failure: the first reason wins.
	_ = g.Wait()
	if !stopped {
		return cause
	}
	cleanupIfUninstalled(ctx, c.cfg, c.kube, c.hookPath, c.store, c.specs)
	return nil
}
