package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
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
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		// A loopback test component with a self-signed certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
}

// openPaths are the component paths served without authorization: health, metrics and
// the CPU profile, read by the harness without a client certificate.
const openPaths = "/healthz,/readyz,/livez,/metrics,/debug/pprof/profile"

// ClientLimits are the client-side rate limits of a component towards the API server.
type ClientLimits struct {
	QPS, Burst int
}

// StartScheduler starts kube-scheduler with its default profile (the plugins and scoring
// a cluster runs by default), without leader election, talking to the API server with
// the admin's credentials at limits. Logs go to logDir.
func (cp *ControlPlane) StartScheduler(ctx context.Context, dir, logDir string, limits ClientLimits) (*Component, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create scheduler directory: %w", err)
	}
	config := filepath.Join(dir, "kube-scheduler.yaml")
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, cp.Kubeconfig, limits.QPS, limits.Burst)
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("write scheduler configuration: %w", err)
	}
	return cp.startComponent(ctx, "kube-scheduler", cp.bins.Scheduler, logDir,
		"--config="+config)
}

// StartControllerManager starts kube-controller-manager with only the given controllers
// (a comma-separated --controllers value), without leader election.
func (cp *ControlPlane) StartControllerManager(ctx context.Context, logDir, controllers string, limits ClientLimits) (*Component, error) {
	return cp.startComponent(ctx, "kube-controller-manager", cp.bins.ControllerManager, logDir,
		"--kubeconfig="+cp.Kubeconfig, "--leader-elect=false", "--controllers="+controllers,
		"--kube-api-qps="+strconv.Itoa(limits.QPS), "--kube-api-burst="+strconv.Itoa(limits.Burst))
}

// startComponent starts a component with the serving and delegated-auth flags both
// components share, and waits until it is healthy.
func (cp *ControlPlane) startComponent(ctx context.Context, name, bin, logDir string, args ...string) (_ *Component, err error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	args = append(args, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[0]),
		"--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--authorization-always-allow-paths="+openPaths, "--feature-gates="+FeatureGates)
	p, err := StartProcess(ctx, name, filepath.Join(logDir, name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	c := &Component{Process: p, URL: "https://127.0.0.1:" + strconv.Itoa(ports[0])}
	if err := WaitHTTP(ctx, p, c.HTTPClient(3*time.Second), c.URL+"/healthz", 120*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}
