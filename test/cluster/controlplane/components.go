package controlplane

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Component is a control-plane program serving its health, metrics and profiles on a
// loopback HTTPS port with a self-signed certificate.
type Component struct {
	*Process
	// URL is the component's secure endpoint, https://127.0.0.1:port.
	URL string
}

// HTTPClient reaches a component: its serving certificate is self-signed.
func (c *Component) HTTPClient(timeout time.Duration) *http.Client {
	return SelfSignedClient(timeout)
}

// openPaths are the component paths served without authorization: health, metrics and
// the CPU profile, read by the harness without a client certificate.
var openPaths = []string{"/healthz", "/readyz", "/livez", "/metrics", "/debug/pprof/profile"}

// SchedulerConfig is what the harnesses set in kube-scheduler's configuration; the rest
// is its default profile (the plugins and scoring a cluster runs by default).
type SchedulerConfig struct {
	// Limits are its client limits towards the API server.
	Limits ClientLimits
	// PercentageOfNodesToScore is the share of the nodes the scheduler filters before it
	// stops looking for more feasible ones; 0 keeps the default, adaptive one.
	PercentageOfNodesToScore int
}

// StartScheduler starts kube-scheduler with the default profile and cfg, without leader
// election, talking to the API server with the admin's credentials. Its configuration
// file is written into dir, its log into logDir.
func (cp *ControlPlane) StartScheduler(ctx context.Context, dir, logDir string, cfg SchedulerConfig) (*Component, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create scheduler directory: %w", err)
	}
	config := filepath.Join(dir, "kube-scheduler.yaml")
	// Leader election is off through SchedulerArgs' --leader-elect, which the scheduler
	// applies over its configuration file.
	text := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
`, cp.Kubeconfig, cfg.Limits.QPS, cfg.Limits.Burst)
	if cfg.PercentageOfNodesToScore > 0 {
		text += fmt.Sprintf("percentageOfNodesToScore: %d\n", cfg.PercentageOfNodesToScore)
	}
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("write scheduler configuration: %w", err)
	}
	spec, err := cp.componentSpec()
	if err != nil {
		return nil, err
	}
	return cp.startComponent(ctx, "kube-scheduler", cp.bins.Scheduler, logDir, spec.SecurePort,
		SchedulerArgs(SchedulerSpec{ComponentSpec: spec, ConfigFile: config}))
}

// StartControllerManager starts kube-controller-manager with only the given controllers,
// without leader election; extra flags follow the shared ones.
func (cp *ControlPlane) StartControllerManager(ctx context.Context, logDir string, controllers []string, limits ClientLimits, extra ...string) (*Component, error) {
	spec, err := cp.componentSpec()
	if err != nil {
		return nil, err
	}
	args := ControllerManagerArgs(ControllerManagerSpec{ComponentSpec: spec, Controllers: controllers, Limits: limits})
	return cp.startComponent(ctx, "kube-controller-manager", cp.bins.ControllerManager, logDir, spec.SecurePort, append(args, extra...))
}

// componentSpec is how the harness runs a scheduler or controller manager: the admin's
// kubeconfig, a free loopback port, the open paths and the harness's feature gates.
func (cp *ControlPlane) componentSpec() (ComponentSpec, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return ComponentSpec{}, err
	}
	return ComponentSpec{Kubeconfig: cp.Kubeconfig, SecurePort: ports[0], AlwaysAllowPaths: openPaths, FeatureGates: FeatureGates}, nil
}

// startComponent starts a component serving on port and waits until it is healthy.
func (cp *ControlPlane) startComponent(ctx context.Context, name, bin, logDir string, port int, args []string) (_ *Component, err error) {
	p, err := StartProcess(ctx, name, filepath.Join(logDir, name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	c := &Component{Process: p, URL: "https://127.0.0.1:" + strconv.Itoa(port)}
	if err := p.waitReady(ctx, 120*time.Second, HTTPCheck(c.HTTPClient(3*time.Second), c.URL+"/healthz", "")); err != nil {
		return nil, err
	}
	return c, nil
}

// CPUProfile records the component's CPU profile for d (its /debug/pprof/profile, open
// to the harness) into path.
func (c *Component) CPUProfile(ctx context.Context, d time.Duration, path string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", c.URL, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTPClient(d + 30*time.Second).Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile of %s: %w", c.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CPU profile of %s: %s", c.name, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("CPU profile of %s: %w", c.name, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write CPU profile: %w", err)
	}
	return nil
}
