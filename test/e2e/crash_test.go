package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
	env.NeedMockNode(t)
	host := env.NeedHost(t, "hold a prepare with a file in the plugin's data directory, read its checkpoint and kill its process")
	ctx := framework.Context(t, 10*time.Minute)
	// The data directory is mounted at the same path in the plugin's container.
	hold := filepath.Join(env.PluginDataDir(), "e2e-prepare-hold")
	if _, err := env.Kubectl(ctx, "-n", framework.Namespace, "set", "env", "daemonset/"+framework.DaemonSet, holdEnv+"="+hold); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = host.Remove(hold)
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
	if err := host.WriteFile(hold, []byte("held by the e2e suite\n")); err != nil {
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

	pid, err := host.PluginPID(string(plugin.UID))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prepare is held; SIGKILL to the plugin, pid %d", pid)
	if err := host.Kill(pid); err != nil {
		t.Fatal(err)
	}
	if err := host.Remove(hold); err != nil {
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
	if _, err := host.Lstat(env.CDISpecFor(uid)); err != nil {
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
		if _, err := host.Lstat(env.CDISpecFor(uid)); err == nil {
			return errors.New("CDI spec left: " + env.CDISpecFor(uid))
		}
		return nil
	})
}
