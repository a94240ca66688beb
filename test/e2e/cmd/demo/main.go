// Command demo applies the demo workloads of demo/ to the local cluster (the driver in mock
// mode on a dgx-h100 node), waits for them and prints, for each pod, its claim, the devices
// the scheduler allocated, and what the container itself sees: NCCL_IB_HCA,
// NCCL_IB_GID_INDEX and /dev/infiniband; for the RoCE pods without hostNetwork also the
// interface the driver attached (address, MAC, GID index of the pod's own address) and a
// ping between them over it. `make demo` runs it after `make cluster-up`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// workload is a demo manifest with its namespace.
type workload struct{ file, namespace, shows string }

// alone are the workloads that run, are shown and are removed one by one before the
// others: the unchanged device-plugin pod and the 8 GPU + 8 NIC pod each get every
// InfiniBand rail of the node, which the whole-port workloads below take too.
var alone = []workload{
	{"demo/legacy-extended-resource/legacy-pod.yaml", "rdma-demo-legacy", "unchanged pod asking for rdma/hca_shared_devices_a: 1 (every IB rail; removed before the rest run)"},
	{"demo/gpu-nic-8x8/gpu-nic-8x8.yaml", "rdma-demo-8x8", "8 mock GPUs, each with the whole IB port on its PCIe root (rdma-dra claim --gpus 8; removed before the rest run)"},
}

// workloads are the demo manifests that run together.
var workloads = []workload{
	{"demo/shared-port/shares-of-one-port.yaml", "rdma-demo-shares", "two pods, each a claim for 4 shares of mlx5_0"},
	{"demo/exclusive-ib-pair/exclusive-ib-pair.yaml", "rdma-demo-exclusive", "two whole IB ports on one NUMA node"},
	{"demo/prefer-whole-port/prefer-whole-port.yaml", "rdma-demo-fallback", "firstAvailable: a whole port, else a share"},
	{"demo/perftest/roce-pair.yaml", rocePairNamespace, "RoCE pair without hostNetwork: macvlan rdma0 from the node's pool"},
}

// The RoCE pair (demo/perftest/roce-pair.yaml): its namespace, pods and pod interface.
const (
	rocePairNamespace = "rdma-demo-roce"
	rocePairIf        = "rdma0"
)

var rocePairPods = []string{"roce-a", "roce-b"}

func main() {
	repo := flag.String("repo", "../..", "repository root (the default is right when run from test/e2e)")
	timeout := flag.Duration("timeout", 4*time.Minute, "how long to wait for the pods")
	flag.Parse()
	if err := run(*repo, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(repo string, timeout time.Duration) error {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	env, err := framework.Load(repo)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(alone)+1)*timeout+2*time.Minute)
	defer cancel()
	// A demo of an earlier run (one that failed half way among them) holds whole rails: it
	// goes first, so that a run from any state shows the same.
	for _, w := range append(slices.Clone(alone), workloads...) {
		if _, err := env.Kubectl(ctx, "delete", "-f", filepath.Join(repo, w.file), "--ignore-not-found", "--wait"); err != nil {
			return err
		}
	}
	var rows []row
	for _, w := range alone {
		if _, err := env.Kubectl(ctx, "apply", "-f", filepath.Join(repo, w.file)); err != nil {
			return err
		}
		fmt.Printf("Applied %s; waiting for its pods ...\n", w.file)
		r, err := waitWorkload(ctx, env, w.namespace, w.shows, timeout)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
		if _, err := env.Kubectl(ctx, "delete", "-f", filepath.Join(repo, w.file), "--wait"); err != nil {
			return err
		}
	}
	for _, w := range workloads {
		if _, err := env.Kubectl(ctx, "apply", "-f", filepath.Join(repo, w.file)); err != nil {
			return err
		}
	}
	fmt.Println("Applied the demo workloads; waiting for their pods ...")
	for _, w := range workloads {
		r, err := waitWorkload(ctx, env, w.namespace, w.shows, timeout)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	printRows(env, rows)
	return printRocePair(ctx, env)
}

// printRocePair prints what each RoCE pod sees on its interface and pings the other pod
// over it.
func printRocePair(ctx context.Context, env *framework.Env) error {
	fmt.Printf("\nRoCE pods without hostNetwork (%s): the driver attached a macvlan child of the port's netdev\n\n", rocePairNamespace)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tINTERFACE\tADDRESS\tMAC\tMTU\tNCCL_IB_GID_INDEX\tNCCL_SOCKET_IFNAME")
	var addrs []string
	for _, pod := range rocePairPods {
		ifc, err := env.PodInterface(ctx, rocePairNamespace, pod, rocePairIf)
		if err != nil {
			return fmt.Errorf("interface of %s: %w", pod, err)
		}
		logs, err := env.Client.CoreV1().Pods(rocePairNamespace).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		rep := framework.ParseLogs(string(logs))
		var shown []string
		for _, a := range ifc.Addresses {
			shown = append(shown, a.String())
			if a.Addr().Is4() {
				addrs = append(addrs, a.Addr().String())
			}
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%d\t%s\t%s\n", rocePairNamespace, pod, ifc.Name, strings.Join(shown, ","), ifc.HardwareAddr, ifc.MTU,
			rep.Env["NCCL_IB_GID_INDEX"], rep.Env["NCCL_SOCKET_IFNAME"])
	}
	tw.Flush()
	if len(addrs) != len(rocePairPods) {
		return fmt.Errorf("the RoCE pods have IPv4 addresses %v, want one each", addrs)
	}
	out, err := env.Exec(ctx, rocePairNamespace, rocePairPods[0], "ping", "-c", "3", "-W", "2", "-I", rocePairIf, addrs[1])
	if err != nil {
		return fmt.Errorf("ping from %s to %s over %s: %w", rocePairPods[0], addrs[1], rocePairIf, err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "packets transmitted") {
			fmt.Printf("\n%s -> %s over %s: %s\n", rocePairPods[0], addrs[1], rocePairIf, strings.TrimSpace(line))
		}
	}
	return nil
}

type row struct {
	shows, pod, claim, devices string
	report                     framework.Report
}

func waitWorkload(ctx context.Context, env *framework.Env, ns, shows string, timeout time.Duration) ([]row, error) {
	var rows []row
	err := framework.Poll(ctx, timeout, 2*time.Second, func(ctx context.Context) error {
		rows = nil
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return errors.New("no pods yet")
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s/%s is %s", ns, p.Name, p.Status.Phase)
			}
			logs, err := env.Client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return err
			}
			rep := framework.ParseLogs(string(logs))
			if len(rep.Devices) == 0 {
				return fmt.Errorf("pod %s/%s has not listed /dev/infiniband yet", ns, p.Name)
			}
			claim, devices, err := allocation(ctx, env, &p)
			if err != nil {
				return err
			}
			rows = append(rows, row{shows: shows, pod: ns + "/" + p.Name, claim: claim, devices: devices, report: rep})
		}
		return nil
	})
	if err != nil {
		out, _ := env.Kubectl(ctx, "get", "pods,resourceclaims,events", "-n", ns)
		return nil, fmt.Errorf("workload in %s: %w\n%s", ns, err, out)
	}
	return rows, nil
}

// allocation returns the pod's claim name and "request=device" of its allocation.
func allocation(ctx context.Context, env *framework.Env, p *corev1.Pod) (string, string, error) {
	var name string
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			name = *s.ResourceClaimName
		}
	}
	if x := p.Status.ExtendedResourceClaimStatus; name == "" && x != nil {
		name = x.ResourceClaimName
	}
	if name == "" {
		return "", "", fmt.Errorf("pod %s has no claim status yet", p.Name)
	}
	c, err := env.Client.ResourceV1().ResourceClaims(p.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	return name, strings.Join(framework.AllocatedDevices(c), ","), nil
}

func printRows(env *framework.Env, rows []row) {
	fmt.Printf("\nrdma-dra-driver demo on node %s (mock dgx-h100: 8 InfiniBand ports mlx5_0..7, 2 RoCE ports mlx5_8/9)\n\n", env.Node)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tCLAIM\tALLOCATED (request=device)\tNCCL_IB_HCA\tNCCL_IB_GID_INDEX\t/dev/infiniband (seen in the container)")
	shows := ""
	for _, r := range rows {
		if r.shows != shows {
			shows = r.shows
			fmt.Fprintf(tw, "# %s\t\t\t\t\t\n", shows)
		}
		gid := r.report.Env["NCCL_IB_GID_INDEX"]
		if gid == "" {
			gid = "-"
		}
		var devs []string
		for _, n := range r.report.DeviceNames() {
			devs = append(devs, n+"("+strings.TrimPrefix(r.report.Devices[n], "c ")+")")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.pod, r.claim, r.devices, r.report.Env["NCCL_IB_HCA"], gid, strings.Join(devs, " "))
	}
	tw.Flush()
	fmt.Printf(`
Explore:
  export KUBECONFIG=%s
  _output/bin/kubectl get resourceslices                       # the node's ports, exclusive and shared
  _output/bin/kubectl get resourceclaims -A -o wide             # who holds what
  _output/bin/kubectl -n rdma-demo-exclusive exec ib-pair -- ls -l /dev/infiniband
  _output/bin/kubectl get rdmapools                              # the pools behind rdma-shared / rdma-exclusive
  _output/bin/kubectl -n rdma-dra-driver logs daemonset/rdma-dra-driver-kubelet-plugin
  _output/bin/kubectl -n rdma-demo-roce exec roce-a -- ip -o addr show dev rdma0
  _output/bin/kubectl -n rdma-demo-roce get resourceclaims -o jsonpath='{.items[*].status.devices[*].networkData}'
Remove the workloads: _output/bin/kubectl delete ns rdma-demo-shares rdma-demo-exclusive rdma-demo-fallback rdma-demo-roce
Tear down:            make cluster-down
`, env.Kubeconfig)
}
