// Command mockgpu is the local cluster's mock GPU driver (gpu.mock.rdma.dra.io): a DRA
// kubelet plugin that publishes the GPUs of a mock sysfs tree and prepares claims with
// CDI specs that set environment variables only. Test tooling, never shipped; see
// test/cluster/mockgpu and docs/local-cluster.md ("Mock GPUs").
package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/mockgpu"
)

// component names the binary in logs and in its API client's user agent.
const component = "mockgpu"

func main() {
	cliflags.Main(newApp())
}

func newApp() *cli.App {
	var cfg mockgpu.Config
	var kube cliflags.KubeClient
	flags := []cli.Flag{
		&cli.StringFlag{Name: "node-name", Usage: "the node this plugin runs on", EnvVars: []string{"NODE_NAME"}, Destination: &cfg.NodeName},
		&cli.StringFlag{Name: "sysfs-root", Usage: "sysfs tree whose GPUs are published", Value: "/sys", EnvVars: []string{"SYSFS_ROOT"}, Destination: &cfg.SysfsRoot},
		&cli.StringFlag{Name: "cdi-root", Usage: "CDI spec directory of the container runtime", Value: "/var/run/cdi", EnvVars: []string{"CDI_ROOT"}, Destination: &cfg.CDIRoot},
		&cli.StringFlag{Name: "kubelet-root", Usage: "the kubelet's root directory (plugins/ and plugins_registry/ below it)", Value: "/var/lib/kubelet", EnvVars: []string{"KUBELET_ROOT"}, Destination: &cfg.KubeletRoot},
	}
	flags = append(flags, kube.Flags(cliflags.KubeClient{QPS: 5, Burst: 10})...)
	app := cliflags.NewApp(component, "publish the GPUs of a mock sysfs tree and prepare claims for them (local cluster only)", flags)
	app.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return cliflags.Usagef("mockgpu takes no arguments, got %q", c.Args().Slice())
		}
		if err := errors.Join(cfg.Validate(), kube.Validate()); err != nil {
			return err
		}
		client, err := kube.Clientset(component)
		if err != nil {
			return err
		}
		return mockgpu.Run(c.Context, cfg, client)
	}
	return app
}
