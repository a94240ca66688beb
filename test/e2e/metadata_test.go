package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/dynamic-resource-allocation/api/metadata"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// TestDeviceMetadataMoves changes where the plugin keeps the device metadata files while a
// claim is prepared and its pod runs (docs/device-metadata.md, "Where the files are on the
// node"): first into the data directory (the chart's deviceMetadata.root empty, as before
// the metadata directory existed), then back to the metadata directory on the host's tmpfs,
// as an upgrade from such a version does. A second pod that joins the claim after each
// move gets its metadata file from the CDI spec written before the move, so the runtime
// finds the file where the plugin moved it, through the data directory's link.
func TestDeviceMetadataMoves(t *testing.T) {
	env.NeedMockNode(t)
	host := env.NeedHost(t, "look at the device metadata files on the node")
	ctx := framework.Context(t, 10*time.Minute)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := env.Install(ctx, shares); err != nil {
			t.Errorf("reinstall with the default values: %v", err)
		}
	})
	link := filepath.Join(env.PluginDataDir(), "dra-device-metadata")

	t.Log("files in the data directory")
	if err := env.Install(ctx, shares, "deviceMetadata.root="); err != nil {
		t.Fatal(err)
	}
	if st, err := host.Lstat(link); err != nil || !st.IsDir() {
		t.Fatalf("%s: want a directory with deviceMetadata.root empty, got %v (%v)", link, st, err)
	}
	ns := env.NewNamespace(t, "metamove")
	claim := env.CreateClaim(t, ns, "port", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_1")}}, ""))
	env.CreatePod(t, framework.WithClaim(framework.ReportPod(ns, "first", ""), claim))
	env.WaitReport(t, ns, "first")
	file := filepath.Join(ns+"_"+claim, "hca", "metadata.json")
	if st, err := host.Lstat(filepath.Join(link, file)); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("metadata file %s in the data directory: %v", filepath.Join(link, file), err)
	}
	expectClaimMetadata(t, ns, "first", claim)

	t.Log("upgrade: files in the metadata directory")
	if err := env.Install(ctx, shares); err != nil {
		t.Fatal(err)
	}
	if target, err := host.Readlink(link); err != nil || target != env.DeviceMetadataDir() {
		t.Fatalf("%s links to %q (%v), want %s", link, target, err, env.DeviceMetadataDir())
	}
	if _, err := host.Lstat(filepath.Join(env.DeviceMetadataDir(), file)); err != nil {
		t.Fatalf("the prepared claim's metadata was not moved: %v", err)
	}
	// The kubelet does not prepare a claim again for a second pod: the new container
	// mounts the file through the path in the CDI spec written before the move.
	env.CreatePod(t, framework.WithClaim(framework.ReportPod(ns, "second", ""), claim))
	env.WaitReport(t, ns, "second")
	expectClaimMetadata(t, ns, "second", claim)
	expectClaimMetadata(t, ns, "first", claim)

	env.DeletePod(t, ns, "first")
	env.DeletePod(t, ns, "second")
	framework.Eventually(t, ctx, time.Minute, time.Second, "the metadata of the unprepared claim removed", func(context.Context) error {
		if _, err := host.Lstat(filepath.Join(env.DeviceMetadataDir(), ns+"_"+claim)); err == nil {
			return fmt.Errorf("%s still there", filepath.Join(env.DeviceMetadataDir(), ns+"_"+claim))
		}
		return nil
	})
}

// expectClaimMetadata reads the metadata file of request hca of the pod's claim (by name)
// inside the pod and checks that it describes the claim.
func expectClaimMetadata(t *testing.T, ns, pod, claim string) {
	t.Helper()
	path := metadata.ResourceClaimFilePath(framework.DriverName, claim, "hca")
	dm, err := env.DeviceMetadataAt(framework.Context(t, time.Minute), ns, pod, path)
	if err != nil {
		t.Errorf("%s: %v", pod, err)
		return
	}
	if dm.Name != claim || dm.Namespace != ns || len(dm.Requests) != 1 || len(dm.Requests[0].Devices) != 1 {
		t.Errorf("%s: %s describes %s/%s with requests %+v, want claim %s/%s with one device", pod, path, dm.Namespace, dm.Name, dm.Requests, ns, claim)
	}
}
