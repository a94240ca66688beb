package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

func TestUninstallReason(t *testing.T) {
	now := metav1.Now()
	ds := func(deleting bool) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plugin"}}
		if deleting {
			d.DeletionTimestamp = &now
			d.Finalizers = []string{"foregroundDeletion"}
		}
		return d
	}
	gr := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	tests := []struct {
		name    string
		objects []runtime.Object
		err     error
		want    string
	}{
		{name: "rolling update: DaemonSet present", objects: []runtime.Object{ds(false)}, want: ""},
		{name: "foreground deletion", objects: []runtime.Object{ds(true)}, want: "DaemonSet is being deleted"},
		{name: "deleted", want: "DaemonSet is gone"},
		{name: "RBAC deleted first", err: apierrors.NewForbidden(gr, "plugin", errors.New("no")), want: "permission to read the DaemonSet is gone"},
		{name: "service account deleted", err: apierrors.NewUnauthorized("token"), want: "service account is gone"},
		{name: "API server unreachable keeps everything", err: errors.New("connection refused"), want: ""},
		{name: "timeout keeps everything", err: apierrors.NewTimeoutError("slow", 1), want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(tc.objects...)
			if tc.err != nil {
				kube.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.err
				})
			}
			if got := UninstallReason(context.Background(), kube, "ns", "plugin"); got != tc.want {
				t.Errorf("UninstallReason = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestUninstallCleanup: without prepared claims everything of this installation goes;
// with one, the checkpoint, the specs and the memlock hook stay (the claim's spec names
// the hook, and a restarting container runs it again). Another installation's spec and
// hook in the same directories are never touched.
func TestUninstallCleanup(t *testing.T) {
	const uid = "0d3e5a2c-1b4f-4c9e-8f00-000000000001"
	const orphan = "0d3e5a2c-1b4f-4c9e-8f00-000000000002"
	const otherDriver = "rdma.example.com"
	tests := []struct {
		name         string
		prepared     bool
		wantDataDir  bool
		wantHook     bool
		wantSpecUIDs []string
	}{
		{name: "no claim prepared: everything goes", prepared: false, wantDataDir: false, wantHook: false, wantSpecUIDs: nil},
		{name: "a claim prepared: checkpoint, specs and hook stay", prepared: true, wantDataDir: true, wantHook: true, wantSpecUIDs: []string{uid, orphan}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := Config{PluginsDir: filepath.Join(root, "plugins"), DriverName: "rdma.dra.io", CDIRoot: filepath.Join(root, "cdi"),
				DeviceMetadata: true, DeviceMetadataRoot: filepath.Join(root, "run")}
			bootID := filepath.Join(root, "boot_id")
			must(t, os.WriteFile(bootID, []byte("boot-1\n"), 0o644))
			must(t, os.MkdirAll(cfg.DataDir(), 0o750))
			must(t, os.WriteFile(filepath.Join(cfg.DataDir(), "dra.sock"), nil, 0o600))
			// A claim's device metadata, in the metadata directory as run.go places it.
			must(t, placeMetadata(cfg.DataDir(), cfg.MetadataDir()))
			metaFile := filepath.Join(cfg.MetadataDir(), "ns_c", "r", "metadata.json")
			must(t, os.MkdirAll(filepath.Dir(metaFile), 0o755))
			must(t, os.WriteFile(metaFile, []byte("{}"), 0o644))
			hook := filepath.Join(root, "bin", cdi.HookFileName(cfg.DriverName))
			otherHook := filepath.Join(root, "bin", cdi.HookFileName(otherDriver))
			must(t, os.MkdirAll(filepath.Dir(hook), 0o755))
			must(t, os.WriteFile(hook, []byte("hook"), 0o755))
			must(t, os.WriteFile(otherHook, []byte("hook"), 0o755))

			store := checkpoint.NewStore(cfg.DataDir(), bootID)
			specs := cdi.NewWriter(cdi.Options{SpecDir: cfg.CDIRoot, DevRoot: "/dev"})
			cp := checkpoint.New("boot-1")
			if tc.prepared {
				cp.Claims[uid] = &checkpoint.Claim{UID: uid, Namespace: "ns", Name: "c", Phase: checkpoint.PhasePrepareCompleted,
					Devices:   []checkpoint.Device{{Request: "r", Pool: "p", Device: "mlx5-0-p1", PortKey: "mlx5-0-p1", Exclusive: true, IBDev: "mlx5_0", Port: 1}},
					UpdatedAt: time.Unix(1, 0).UTC()}
			}
			unlock, err := store.Lock()
			must(t, err)
			must(t, store.Save(cp))
			unlock()
			// List and Remove go by file name only.
			must(t, os.MkdirAll(cfg.CDIRoot, 0o755))
			for _, u := range []string{uid, orphan} {
				must(t, os.WriteFile(filepath.Join(cfg.CDIRoot, cdi.SpecFileName(cfg.DriverName, u)), []byte("{}"), 0o644))
			}
			otherSpec := filepath.Join(cfg.CDIRoot, cdi.SpecFileName(otherDriver, orphan))
			must(t, os.WriteFile(otherSpec, []byte("{}"), 0o644))

			if err := UninstallCleanup(context.Background(), cfg, hook, store, specs); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(hook); (err == nil) != tc.wantHook {
				t.Errorf("hook present = %v, want %v", err == nil, tc.wantHook)
			}
			for _, p := range []string{otherHook, otherSpec} {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("another installation's file %s: %v", p, err)
				}
			}
			_, err = os.Stat(store.Path())
			if gotDir := err == nil; gotDir != tc.wantDataDir {
				t.Errorf("checkpoint present = %v, want %v", gotDir, tc.wantDataDir)
			}
			if _, err := os.Stat(cfg.DataDir()); (err == nil) != tc.wantDataDir {
				t.Errorf("data directory present = %v, want %v", err == nil, tc.wantDataDir)
			}
			if _, err := os.Stat(metaFile); (err == nil) != tc.wantDataDir {
				t.Errorf("device metadata present = %v, want %v", err == nil, tc.wantDataDir)
			}
			if _, err := os.Stat(cfg.MetadataDir()); err != nil {
				t.Errorf("the metadata directory itself (a mount point in the chart) is gone: %v", err)
			}
			got, err := specs.List()
			must(t, err)
			if len(got) != len(tc.wantSpecUIDs) {
				t.Errorf("specs left = %v, want %v", got, tc.wantSpecUIDs)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
