package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
)

// SmokeResource is the extended resource of the smoke test's device plugin.
const SmokeResource = "localcluster.rdma.dra.io/smoke"

// smokePlugin is a one-device device plugin that answers Allocate with a CDI device name.
// The kubelet hands CDI names to the runtime in the CRI's CDIDevices field, the same path
// DRA drivers use, so a pod that requests the resource proves kubelet -> CRI -> containerd
// CDI injection without a DRA driver.
type smokePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	cdiDevice string
	done      chan struct{}
}

func (p *smokePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *smokePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: []*pluginapi.Device{{ID: "hca0", Health: pluginapi.Healthy}}}); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-s.Context().Done():
	}
	return nil
}

func (p *smokePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			CdiDevices: []*pluginapi.CDIDevice{{Name: p.cdiDevice}},
		})
	}
	return resp, nil
}

// serveSmokePlugin starts the plugin on a socket in the kubelet's device-plugin directory
// and registers it; the returned function stops it.
func serveSmokePlugin(ctx context.Context, l Layout, cdiDevice string) (func(), error) {
	// The kubelet serves device-plugin registration at a fixed path, whatever its --root-dir.
	dir := pluginapi.DevicePluginPath
	sock := filepath.Join(dir, "localcluster-smoke.sock")
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	p := &smokePlugin{cdiDevice: cdiDevice, done: make(chan struct{})}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	stop := func() {
		close(p.done)
		srv.Stop()
		_ = os.Remove(sock)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		stop()
		return nil, fmt.Errorf("connect to the kubelet's device-plugin registry: %w", err)
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(sock), ResourceName: SmokeResource,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("register the smoke device plugin: %w", err)
	}
	return stop, nil
}

const smokeCDIPod = `apiVersion: v1
kind: Pod
metadata:
  name: localcluster-smoke-cdi
  namespace: default
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: toolbox
    image: localhost/toolbox:latest
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "test -c /dev/infiniband/uverbs0 && ls -l /dev/infiniband/ && echo env=$LOCALCLUSTER_CDI_SMOKE"]
    resources:
      limits: {"` + SmokeResource + `": 1}
`

// smokeCDIPod runs a pod that gets the CDI device through the kubelet.
func (c *Cluster) smokeCDIPod(ctx context.Context) error {
	stop, err := serveSmokePlugin(ctx, c.Layout, SmokeCDIKind+"=hca0")
	if err != nil {
		return err
	}
	defer stop()
	node, err := c.kubectl(ctx, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		return err
	}
	jp := fmt.Sprintf("jsonpath={.status.allocatable.%s}", strings.NewReplacer(".", `\.`, "/", `\/`).Replace(SmokeResource))
	if err := controlplane.WaitFor(ctx, "smoke device on the node", time.Minute, nil, func(ctx context.Context) error {
		out, err := c.kubectl(ctx, "get", "node", node, "-o", jp)
		if err == nil && strings.TrimSpace(out) != "1" {
			err = errors.New("allocatable " + SmokeResource + " = " + out)
		}
		return err
	}); err != nil {
		return err
	}
	const name = "localcluster-smoke-cdi"
	_, _ = c.kubectl(ctx, "delete", "pod", name, "--ignore-not-found", "--wait=true")
	if err := c.apply(ctx, smokeCDIPod); err != nil {
		return err
	}
	defer c.kubectl(ctx, "delete", "pod", name, "--wait=false") //nolint:errcheck // best effort
	err = c.waitPodSucceeded(ctx, name, 2*time.Minute)
	logs, _ := c.kubectl(ctx, "logs", name)
	if err != nil {
		desc, _ := c.kubectl(ctx, "describe", "pod", name)
		return fmt.Errorf("pod %s did not succeed: %w\nlogs:\n%s\n%s", name, err, logs, desc)
	}
	if !strings.Contains(logs, "env=hca0") {
		return fmt.Errorf("pod %s did not see the CDI device's env:\n%s", name, logs)
	}
	c.Log.Info("smoke: CDI device injected into a pod through kubelet and CRI", "output", strings.TrimSpace(logs))
	return nil
}
