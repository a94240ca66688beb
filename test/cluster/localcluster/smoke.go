package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
)

// smokePod runs the toolbox image to completion and reads the API server's /version through
// the kubernetes service's cluster IP, which needs kube-proxy.
const smokePod = `apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: default
  labels: {app.kubernetes.io/name: localcluster-smoke}
spec:
  restartPolicy: Never
  hostNetwork: %[2]t
  terminationGracePeriodSeconds: 1
  containers:
  - name: toolbox
    image: localhost/toolbox:latest
    imagePullPolicy: Never
    command: ["/bin/sh", "-c"]
    args:
    - |
      set -e
      echo "toolbox runs on $(uname -n)"
      # Plain HTTP to the TLS port: the API server's "400 Bad Request" proves the path
      # through the service IP (busybox's static wget cannot be used in pods).
      out=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 10 "${KUBERNETES_SERVICE_HOST}" "${KUBERNETES_SERVICE_PORT}" || true)
      echo "$out"
      echo "$out" | grep -q "400 Bad Request"
      echo "service ${KUBERNETES_SERVICE_HOST} reachable"
`

// Smoke proves that pods run (on the pod network and on the host network, both reaching
// the API server through its service IP) and that containerd injects CDI devices.
func (c *Cluster) Smoke(ctx context.Context) error {
	start := time.Now()
	pods := map[string]bool{"localcluster-smoke": false, "localcluster-smoke-hostnet": true}
	for name, hostNet := range pods {
		_, _ = c.kubectl(ctx, "delete", "pod", name, "--ignore-not-found", "--wait=true")
		if err := c.apply(ctx, fmt.Sprintf(smokePod, name, hostNet)); err != nil {
			return err
		}
	}
	for name := range pods {
		err := c.waitPodSucceeded(ctx, name, 2*time.Minute)
		logs, _ := c.kubectl(ctx, "logs", name)
		if err != nil {
			desc, _ := c.kubectl(ctx, "describe", "pod", name)
			return fmt.Errorf("pod %s did not succeed: %w\nlogs:\n%s\n%s", name, err, logs, desc)
		}
		if !strings.Contains(logs, "reachable") {
			return fmt.Errorf("pod %s: unexpected output:\n%s", name, logs)
		}
		_, _ = c.kubectl(ctx, "delete", "pod", name, "--wait=false")
		c.Log.Info("smoke: pod succeeded", "pod", name, "hostNetwork", pods[name])
	}
	if err := c.smokeCDI(ctx); err != nil {
		return err
	}
	if err := c.smokeCDIPod(ctx); err != nil {
		return err
	}
	c.Log.Info("smoke test passed", "took", time.Since(start).Round(time.Second).String())
	return nil
}

// waitPodSucceeded waits until the pod has finished and fails fast when it failed.
func (c *Cluster) waitPodSucceeded(ctx context.Context, name string, timeout time.Duration) error {
	var phase string
	err := controlplane.WaitFor(ctx, "pod "+name, timeout, nil, func(ctx context.Context) error {
		out, err := c.kubectl(ctx, "get", "pod", name, "-o", "jsonpath={.status.phase}")
		if err != nil {
			return err
		}
		phase = strings.TrimSpace(out)
		if phase == "Succeeded" || phase == "Failed" {
			return nil
		}
		return fmt.Errorf("phase %q", phase)
	})
	if err == nil && phase != "Succeeded" {
		err = fmt.Errorf("pod %s %s", name, phase)
	}
	return err
}

func (c *Cluster) apply(ctx context.Context, manifest string) error {
	f, err := os.CreateTemp("", "localcluster-*.yaml")
	if err != nil {
		return fmt.Errorf("temp manifest: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(manifest); err != nil {
		f.Close()
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	_, err = c.kubectl(ctx, "apply", "-f", f.Name())
	return err
}

// smokeDevice returns a character device node on the host for the CDI test: the mock
// node's uverbs0 when it has one, else a node of our own with the uverbs major number.
func (c *Cluster) smokeDevice() (string, error) {
	mock := filepath.Join(c.Layout.MockDev(), "infiniband", "uverbs0")
	if fi, err := os.Stat(mock); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return mock, nil
	}
	dir := filepath.Join(StateRoot, "smoke-dev")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	p := filepath.Join(dir, "uverbs0")
	_ = os.Remove(p)
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(231, 192))); err != nil {
		return "", fmt.Errorf("mknod %s: %w", p, err)
	}
	return p, nil
}

// smokeCDI writes a static CDI spec for one device and runs the toolbox with that device
// through containerd, whose CDI support reads /var/run/cdi, and checks that the container
// sees the device node and the environment of the spec.
func (c *Cluster) smokeCDI(ctx context.Context) error {
	dev, err := c.smokeDevice()
	if err != nil {
		return err
	}
	spec := fmt.Sprintf(`cdiVersion: "0.6.0"
kind: %s
devices:
- name: hca0
  containerEdits:
    deviceNodes:
    - path: /dev/infiniband/uverbs0
      hostPath: %s
    env:
    - LOCALCLUSTER_CDI_SMOKE=hca0
`, SmokeCDIKind, dev)
	if err := os.MkdirAll(filepath.Dir(c.Layout.SmokeCDISpec()), 0o755); err != nil {
		return fmt.Errorf("create CDI dir: %w", err)
	}
	if err := os.WriteFile(c.Layout.SmokeCDISpec(), []byte(spec), 0o644); err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	id := fmt.Sprintf("localcluster-cdi-smoke-%d", time.Now().Unix())
	out, err := ctr(ctx, c.Layout, c.Bins, "-n", "k8s.io", "run", "--rm", "--fifo-dir", filepath.Join(RunRoot, "fifo"),
		"--device", SmokeCDIKind+"=hca0", ToolboxImage, id,
		"/bin/sh", "-c", `test -c /dev/infiniband/uverbs0 && ls -l /dev/infiniband/uverbs0 && echo "env=$LOCALCLUSTER_CDI_SMOKE"`)
	if err != nil {
		return fmt.Errorf("CDI smoke container: %w", err)
	}
	if !strings.Contains(out, "env=hca0") || !strings.Contains(out, "231, 192") && !strings.Contains(out, "uverbs0") {
		return fmt.Errorf("CDI smoke container did not see the device and env:\n%s", out)
	}
	c.Log.Info("smoke: CDI device injected by containerd", "device", dev, "output", strings.TrimSpace(out))
	return nil
}
