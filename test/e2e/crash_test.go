package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// holdEnv is the plugin's test failpoint (docs/kubelet-plugin.md, "Test failpoint"), in
// plugins built with -tags failpoint only, as make cluster-up builds the suite's image.
const holdEnv = "RDMA_DRA_TEST_PREPARE_HOLD"

// TestPluginKilledDuringPrepare kills the plugin with SIGKILL after it saved PrepareStarted
// and before it wrote the claim's CDI spec. The restarted plugin must finish the prepare:
// the pod starts with the right devices; after the pod is gone, neither a CDI spec nor a
// checkpoint entry of the claim is left.
func TestPluginKilledDuringPrepare(t *testing.T) {
	ctx := framework.Context(t, 10*time.Minute)
	// The data directory is mounted at the same path in the plugin's container.
	hold := filepath.Join(env.PluginDataDir(), "e2e-prepare-hold")
	if _, err := env.Kubectl(ctx, "-n", framework.Namespace, "set", "env", "daemonset/"+framework.DaemonSet, holdEnv+"="+hold); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Remove(hold)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if _, err := env.Kubectl(ctx, "-n", framework.Namespace, "set", "env", "daemonset/"+framework.DaemonSet, holdEnv+"-"); err != nil {
			t.Errorf("unset failpoint: %v", err)
		}
		if err := env.WaitReady(ctx, shares); err != nil {
			t.Errorf("plugin after the test: %v", err)
		}
	})
	if err := env.WaitReady(ctx, shares); err != nil {
		t.Fatal(err)
	}
	plugin, err := env.PluginPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restarts := plugin.Status.ContainerStatuses[0].RestartCount
	if err := os.WriteFile(hold, []byte("held by the e2e suite\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	ns := env.NewNamespace(t, "crash")
	env.CreateClaimTemplate(t, ns, "whole", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort("mlx5_7")}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "victim", "whole"))
	claim := env.PodClaim(t, ns, "victim")
	uid := string(claim.UID)
	framework.Eventually(t, ctx, 2*time.Minute, 500*time.Millisecond, "checkpoint entry PrepareStarted", func(context.Context) error {
		cp, err := env.Checkpoint()
		if err != nil {
			return err
		}
		switch e := cp[uid]; e.Phase {
		case "PrepareStarted":
		case "PrepareCompleted":
			return fmt.Errorf("claim %s was prepared without a hold: is the plugin built with -tags failpoint (make cluster-up's GO_TAGS=failpoint)?", uid)
		default:
			return fmt.Errorf("entry of claim %s: %+v", uid, e)
		}
		return nil
	})

	pid, err := pluginPID(string(plugin.UID))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prepare is held; SIGKILL to the plugin, pid %d", pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, ctx, 3*time.Minute, time.Second, "plugin container restarted", func(ctx context.Context) error {
		p, err := env.PluginPod(ctx)
		if err != nil {
			return err
		}
		if s := p.Status.ContainerStatuses[0]; s.RestartCount <= restarts || !s.Ready {
			return fmt.Errorf("restarts %d, ready %v", s.RestartCount, s.Ready)
		}
		return nil
	})

	assertSees(t, "victim", env.WaitReport(t, ns, "victim"), want{ibdevs: []string{"mlx5_7"}})
	cp, err := env.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if cp[uid].Phase != "PrepareCompleted" {
		t.Errorf("checkpoint entry after the restart: %+v, want PrepareCompleted", cp[uid])
	}
	if _, err := statFile(env.CDISpecFor(uid)); err != nil {
		t.Errorf("CDI spec of the running pod's claim: %v", err)
	}

	env.DeletePod(t, ns, "victim")
	framework.Eventually(t, ctx, 2*time.Minute, time.Second, "claim state removed from the node", func(context.Context) error {
		cp, err := env.Checkpoint()
		if err != nil {
			return err
		}
		if e, ok := cp[uid]; ok {
			return fmt.Errorf("checkpoint entry left: %+v", e)
		}
		if _, err := statFile(env.CDISpecFor(uid)); err == nil {
			return errors.New("CDI spec left: " + env.CDISpecFor(uid))
		}
		return nil
	})
}

// pluginPID finds the process of the plugin pod with that UID on the host: its command
// line and the POD_UID the chart gives it. Right after a rollout the previous pod's
// process may still be shutting down next to it, so the command line alone is not enough.
func pluginPID(podUID string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		// The plugin itself, not its readiness probe (`rdma-dra-kubeletplugin ready`, which
		// runs in the same container with the same environment every 2 seconds).
		if argv := strings.Split(strings.TrimSuffix(string(cmd), "\x00"), "\x00"); len(argv) != 1 || argv[0] != "/usr/bin/rdma-dra-kubeletplugin" {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(environ), "\x00"), "POD_UID="+podUID) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		return 0, fmt.Errorf("found %d processes of plugin pod %s %v, want 1", len(pids), podUID, pids)
	}
	return pids[0], nil
}
