package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/doctor"
)

// doctorConfig is the doctor command's configuration.
type doctorConfig struct {
	Host             doctor.Host
	CDIDirs          string
	Output           string
	WarningsAsErrors bool
	Kubeconfig       string
	Node             string
	NoCluster        bool
}

func doctorCommand() *cli.Command {
	cfg := &doctorConfig{Host: doctor.DefaultHost()}
	h := &cfg.Host
	return &cli.Command{
		Name:  "doctor",
		Usage: "check this node's prerequisites for the driver and explain each finding",
		Description: "One line per check, OK, WARN, FAIL or SKIP, with what was found and, for WARN and FAIL, the fix:\n" +
			"kernel modules, RDMA devices and their character devices, port states, the RDMA netns mode,\n" +
			"RoCE GIDs, GPUDirect RDMA, and the container runtime's CDI, NRI and memlock settings. With a\n" +
			"kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config, or the pod's service account) also the\n" +
			"cluster: the API server's and this node's kubelet's versions, the DRA API, and the device model\n" +
			"the plugin will publish (a dry-run create of the node's ResourceSlices: nothing is stored).\n" +
			"It changes nothing. Exit status 1 when a check fails (with --warnings-as-errors also when one\n" +
			"warns). docs/cli.md lists the checks.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sysfs-root", Usage: "directory to read sysfs from, e.g. `DIR`/sys of a mock node", Value: h.SysfsRoot, Destination: &h.SysfsRoot, EnvVars: []string{"SYSFS_ROOT"}, TakesFile: true},
			&cli.StringFlag{Name: "dev-root", Usage: "the host's /dev, where infiniband/uverbsN and rdma_cm are", Value: h.DevRoot, Destination: &h.DevRoot, EnvVars: []string{"DEV_ROOT"}, TakesFile: true},
			&cli.StringFlag{Name: "proc-root", Usage: "the host's /proc, to find the container runtime's process and limits", Value: h.ProcRoot, Destination: &h.ProcRoot, EnvVars: []string{"PROC_ROOT"}, TakesFile: true},
			&cli.StringFlag{Name: "containerd-config", Usage: "containerd's config `FILE` (its imports are read too)", Value: h.ContainerdConfig, Destination: &h.ContainerdConfig, EnvVars: []string{"CONTAINERD_CONFIG"}, TakesFile: true},
			&cli.StringFlag{Name: "crio-config", Usage: "CRI-O's config `FILE`; FILE.d is read after it", Value: h.CRIOConfig, Destination: &h.CRIOConfig, EnvVars: []string{"CRIO_CONFIG"}, TakesFile: true},
			&cli.StringFlag{Name: "cdi-dirs", Usage: "comma-separated CDI spec directories the driver needs: the runtime must scan each, each must be writable", Value: strings.Join(doctor.DefaultCDIDirs, ","), Destination: &cfg.CDIDirs, EnvVars: []string{"CDI_DIRS"}},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output format: table, json or yaml", Value: outputTable, Destination: &cfg.Output, EnvVars: []string{"OUTPUT"}},
			&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig `FILE` for the cluster checks (default: KUBECONFIG, ~/.kube/config, or the pod's service account)", Destination: &cfg.Kubeconfig, EnvVars: []string{"KUBECONFIG"}, TakesFile: true},
			&cli.StringFlag{Name: "node", Usage: "this node's name in the cluster (default: the host name)", Destination: &cfg.Node, EnvVars: []string{"NODE_NAME"}},
			&cli.BoolFlag{Name: "no-cluster", Usage: "check this node only, ask nothing of the API server", Destination: &cfg.NoCluster, EnvVars: []string{"NO_CLUSTER"}},
			&cli.BoolFlag{Name: "warnings-as-errors", Usage: "exit with status 1 when a check warns, not only when one fails", Destination: &cfg.WarningsAsErrors, EnvVars: []string{"WARNINGS_AS_ERRORS"}},
		},
		Action: func(c *cli.Context) error {
			if err := cliflags.NoArgs(c, sysfsRootHint); err != nil {
				return err
			}
			return runDoctor(c, cfg)
		},
	}
}

func runDoctor(c *cli.Context, cfg *doctorConfig) error {
	switch cfg.Output {
	case outputTable, outputJSON, outputYAML:
	default:
		return cliflags.Usagef("unknown output format %q: want table, json or yaml", cfg.Output)
	}
	h := cfg.Host
	h.CDIDirs = nil
	for _, d := range strings.Split(cfg.CDIDirs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			h.CDIDirs = append(h.CDIDirs, d)
		}
	}
	h.UseNetlink = isLiveRoot(h.SysfsRoot)
	if cfg.NoCluster {
		h.ClusterSkipped = "not checked (--no-cluster)"
	} else {
		var err error
		if h.Cluster, h.ClusterSkipped, err = doctorCluster(cfg.Kubeconfig, cfg.Node); err != nil {
			return err
		}
	}
	results := doctor.Run(c.Context, h)

	w := c.App.Writer
	if cfg.Output == outputTable {
		if err := doctor.WriteText(w, results); err != nil {
			return err
		}
	} else {
		b, err := doctor.MarshalDocument(results)
		if err != nil {
			return err
		}
		if cfg.Output == outputYAML {
			if b, err = orderedYAML(b); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if failed := doctor.Named(results, doctor.Fail); len(failed) > 0 {
		return fmt.Errorf("%d of %d checks failed: %s", len(failed), len(results), strings.Join(failed, ", "))
	}
	if warned := doctor.Named(results, doctor.Warn); cfg.WarningsAsErrors && len(warned) > 0 {
		return fmt.Errorf("%d of %d checks warned (--warnings-as-errors): %s", len(warned), len(results), strings.Join(warned, ", "))
	}
	return nil
}

// doctorCluster connects to the cluster for the doctor's cluster checks: the kubeconfig
// file if given, else KUBECONFIG or ~/.kube/config, else the pod's service account.
// Without any of them it returns nil and why; a kubeconfig that cannot be loaded is an
// error that names it.
func doctorCluster(kubeconfig, node string) (*doctor.Cluster, string, error) {
	cfg, err := restConfig(kubeconfig)
	if clientcmd.IsEmptyConfig(err) && kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, "not checked: no kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and not in a pod", nil
		}
	}
	if err != nil {
		return nil, "", cliflags.Usagef("cluster checks: load the kubeconfig: %v (--no-cluster checks this node only)", err)
	}
	// A preflight must not hang on an unreachable API server.
	cfg.Timeout = 15 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("cluster checks: client: %w", err)
	}
	if node == "" {
		if node, err = os.Hostname(); err != nil {
			return nil, "", fmt.Errorf("cluster checks: this node's name: %w (pass --node)", err)
		}
	}
	return &doctor.Cluster{Client: client, Node: node}, "", nil
}
