package e2e

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// upgradeFrom is the revision TestUpgradeFromPrevious installs first: the main branch this
// version was developed from, until the project tags releases (then: the last release).
// E2E_UPGRADE_FROM overrides it.
const upgradeFrom = "9b0329d"

// TestUpgradeFromPrevious installs the previous version, chart and image both (the image
// built from that revision's tree), runs pods on a shared and on an exclusive claim, and
// upgrades to this version with helm upgrade, as an operator does. The pods keep running
// through the upgrade (same pod, no container restart), the new plugin takes over their
// prepared claims from the old one's checkpoint: a second pod joins the shared claim and
// sees its port, and deleting the pods unprepares both claims, leaving no CDI spec and no
// checkpoint entry.
func TestUpgradeFromPrevious(t *testing.T) {
	env.NeedMockNode(t)
	host := env.NeedHost(t, "import the previous version's image into the node's container runtime and read the plugin's checkpoint")
	ctx := framework.Context(t, 15*time.Minute)
	ref := upgradeFrom
	if v := os.Getenv("E2E_UPGRADE_FROM"); v != "" {
		ref = v
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", env.Repo, "cat-file", "-e", ref+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("revision %s (the previous version) is not in this clone, a shallow one? %v: %s", ref, err, out)
	}
	tag := gitShort(t, ctx, ref)
	suitePod, err := env.PluginPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	image := suitePod.Spec.Containers[0].Image
	if strings.HasSuffix(image, ":"+tag) {
		t.Fatalf("E2E_UPGRADE_FROM=%s is the suite's image %s: nothing to upgrade from", ref, image)
	}

	t.Logf("building the image of %s", ref)
	build := exec.CommandContext(ctx, "make", "--no-print-directory", "image-oci", "IMAGE_SOURCE="+ref)
	build.Dir = env.Repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image-oci IMAGE_SOURCE=%s: %v\n%s", ref, err, out)
	}
	archive := filepath.Join(env.Repo, "_output", "images", "rdma-dra-driver-"+tag+".oci.tar")
	if err := host.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	oldChart := t.TempDir()
	extract := exec.CommandContext(ctx, "sh", "-c", `set -eu; git -C "$1" archive --format=tar "$2" deployments/helm/rdma-dra-driver | tar -x -C "$3"`,
		"extract", env.Repo, ref, oldChart)
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("the chart of %s: %v: %s", ref, err, out)
	}
	oldChart = filepath.Join(oldChart, "deployments", "helm", "rdma-dra-driver")

	// A fresh installation of the previous version, not a downgrade of this one.
	uninstallSuite(t, ctx, host, filepath.Join(env.HookInstallDir(), "rdma-dra-cdi-hook"), false)
	// The values the previous version took: an operator upgrades with those first and turns
	// on what this version adds afterwards (docs/install.md, Upgrading).
	oldValues := valuesForChart(t, oldChart, nodeConfigKeys(t, ctx, ref), env.ValuesArgs())
	args := append([]string{"upgrade", "--install", framework.Release, oldChart, "--namespace", framework.Namespace}, oldValues...)
	if _, err := env.Helm(ctx, append(args, "--set-string", "image.tag="+tag)...); err != nil {
		t.Fatalf("install %s: %v", ref, err)
	}
	if err := env.WaitReady(ctx, shares); err != nil {
		t.Fatalf("the previous version: %v", err)
	}
	expectPluginImage(t, ctx, ":"+tag)

	ns := env.NewNamespace(t, "upgrade")
	shared := env.CreateClaim(t, ns, "shared", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_2")}}, ""))
	whole := env.CreateClaim(t, ns, "whole", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort("mlx5_3")}}, ""))
	env.CreatePod(t, framework.WithClaim(framework.ReportPod(ns, "shared-1", ""), shared))
	env.CreatePod(t, framework.WithClaim(framework.ReportPod(ns, "whole", ""), whole))
	assertSees(t, "shared-1", env.WaitReport(t, ns, "shared-1"), want{ibdevs: []string{"mlx5_2"}})
	assertSees(t, "whole", env.WaitReport(t, ns, "whole"), want{ibdevs: []string{"mlx5_3"}})
	before := podStates(t, ctx, ns, "shared-1", "whole")
	uids := claimUIDs(t, ctx, ns, shared, whole)
	expectPrepared(t, uids)

	t.Logf("helm upgrade from %s to this version, with the values of %s", ref, ref)
	upgrade := append([]string{"upgrade", framework.Release, env.ChartDir(), "--namespace", framework.Namespace}, oldValues...)
	if _, err := env.Helm(ctx, upgrade...); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if err := env.WaitReady(ctx, shares); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	expectPluginImage(t, ctx, image)
	if after := podStates(t, ctx, ns, "shared-1", "whole"); after != before {
		t.Errorf("the pods changed during the upgrade:\nbefore %s\n after %s", before, after)
	}
	expectPrepared(t, uids)
	env.CreatePod(t, framework.WithClaim(framework.ReportPod(ns, "shared-2", ""), shared))
	assertSees(t, "shared-2", env.WaitReport(t, ns, "shared-2"), want{ibdevs: []string{"mlx5_2"}})

	for _, p := range []string{"shared-1", "shared-2", "whole"} {
		env.DeletePod(t, ns, p)
	}
	framework.Eventually(t, ctx, time.Minute, time.Second, "both claims unprepared by the new plugin", func(context.Context) error {
		cp, err := env.Checkpoint()
		if err != nil {
			return err
		}
		for name, uid := range uids {
			if _, ok := cp[uid]; ok {
				return fmt.Errorf("claim %s still in the checkpoint", name)
			}
			if _, err := host.Lstat(env.CDISpecFor(uid)); err == nil {
				return fmt.Errorf("claim %s still has its CDI spec %s", name, env.CDISpecFor(uid))
			}
		}
		return nil
	})

	// Then what this version adds (the suite's values turn on pools.legacy): the new
	// controller's webhook, now running, admits the legacy pool.
	t.Log("the suite's values, with what this version adds")
	if err := env.Install(ctx, shares); err != nil {
		t.Fatalf("enable this version's pools: %v", err)
	}
	if _, err := env.Client.ResourceV1().DeviceClasses().Get(ctx, legacyClass, metav1.GetOptions{}); err != nil {
		t.Errorf("the legacy pool's DeviceClass after the upgrade: %v", err)
	}
}

// gitShort is git rev-parse --short of the repository, as make image-oci names the tag.
func gitShort(t *testing.T, ctx context.Context, ref string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "git", "-C", env.Repo, "rev-parse", "--short", ref).Output()
	if err != nil {
		t.Fatalf("git rev-parse --short %s: %v", ref, err)
	}
	return strings.TrimSpace(string(out))
}

// expectPluginImage checks that the running plugin pod runs an image whose reference ends
// in suffix (a whole reference, or ":" and a tag).
func expectPluginImage(t *testing.T, ctx context.Context, suffix string) {
	t.Helper()
	pod, err := env.PluginPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if img := pod.Spec.Containers[0].Image; !strings.HasSuffix(img, suffix) {
		t.Fatalf("plugin pod %s runs %s, want the image tagged %s", pod.Name, img, strings.TrimPrefix(suffix, ":"))
	}
}

// podStates describes the pods by what an upgrade must not change: UID, phase, and
// each container's restart count and start time.
func podStates(t *testing.T, ctx context.Context, ns string, names ...string) string {
	t.Helper()
	var b strings.Builder
	for _, n := range names {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s uid=%s phase=%s", n, p.UID, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s:restarts=%d", c.Name, c.RestartCount)
			if c.State.Running != nil {
				fmt.Fprintf(&b, ",started=%s", c.State.Running.StartedAt.UTC().Format(time.RFC3339))
			}
		}
		if p.Status.Phase != corev1.PodRunning {
			fmt.Fprint(&b, " NOT RUNNING")
		}
		b.WriteString("; ")
	}
	return b.String()
}

// claimUIDs maps each claim's name to its UID.
func claimUIDs(t *testing.T, ctx context.Context, ns string, names ...string) map[string]string {
	t.Helper()
	uids := map[string]string{}
	for _, n := range names {
		c, err := env.Client.ResourceV1().ResourceClaims(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[n] = string(c.UID)
	}
	return uids
}

// expectPrepared checks that the plugin's checkpoint holds each claim (by UID) as
// completely prepared.
func expectPrepared(t *testing.T, uids map[string]string) {
	t.Helper()
	cp, err := env.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	for name, uid := range uids {
		if e := cp[uid]; e.Phase != "PrepareCompleted" {
			t.Errorf("checkpoint entry of claim %s (%s): %+v, want PrepareCompleted (%d entries)", name, uid, e, len(cp))
		}
	}
}

// valuesForChart returns the --values arguments args with copies of the files that leave
// out what the version at chartDir does not know, as an operator's values for that version
// would: the pools its chart does not have (pools.legacy came after the previous version),
// which its values schema refuses, and the node configuration's sections its plugin does
// not have (nodeConfigKeys; nodeConfig.rails came after), which its strict decoder
// refuses. Nothing else is changed.
func valuesForChart(t *testing.T, chartDir string, nodeConfigKeys map[string]bool, args []string) []string {
	t.Helper()
	var defaults struct {
		Pools map[string]any `json:"pools"`
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &defaults); err != nil {
		t.Fatalf("values.yaml of %s: %v", chartDir, err)
	}
	out := slices.Clone(args)
	for i := 1; i < len(out); i += 2 {
		data, err := os.ReadFile(out[i])
		if err != nil {
			t.Fatal(err)
		}
		var values map[string]any
		if err := yaml.Unmarshal(data, &values); err != nil {
			t.Fatalf("%s: %v", out[i], err)
		}
		pools, _ := values["pools"].(map[string]any)
		dropped := false
		for name := range pools {
			if _, ok := defaults.Pools[name]; !ok {
				delete(pools, name)
				dropped = true
			}
		}
		nodeConfig, _ := values["nodeConfig"].(map[string]any)
		for key := range nodeConfig {
			if !nodeConfigKeys[key] {
				delete(nodeConfig, key)
				dropped = true
			}
		}
		if !dropped {
			continue
		}
		if data, err = yaml.Marshal(values); err != nil {
			t.Fatal(err)
		}
		copyPath := filepath.Join(t.TempDir(), filepath.Base(out[i]))
		if err := os.WriteFile(copyPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out[i] = copyPath
	}
	return out
}

// nodeConfigKeys returns the top-level keys of the node configuration at revision ref: the
// JSON names of the fields of its nodeconfig.Config, read from that revision's source.
func nodeConfigKeys(t *testing.T, ctx context.Context, ref string) map[string]bool {
	t.Helper()
	const file = "pkg/nodeconfig/config.go"
	src, err := exec.CommandContext(ctx, "git", "-C", env.Repo, "show", ref+":"+file).Output()
	if err != nil {
		t.Fatalf("%s of %s: %v", file, ref, err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), file, src, 0)
	if err != nil {
		t.Fatalf("%s of %s: %v", file, ref, err)
	}
	keys := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				continue
			}
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name != "" && name != "-" {
				keys[name] = true
			}
		}
		return false
	})
	if len(keys) == 0 {
		t.Fatalf("%s of %s has no Config struct with JSON fields", file, ref)
	}
	return keys
}
