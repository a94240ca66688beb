package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// startMetadataHelper serves d through the real helper with device metadata enabled,
// writing into h's CDI directory, and connects d to it as run.go does.
func startMetadataHelper(t testing.TB, ctx context.Context, h *harness, d *Driver, name string) (drapbv1.DRAPluginClient, string) {
	t.Helper()
	return startMetadataHelperIn(t, ctx, h, d, name, filepath.Join(testRoot, name+"m"))
}

// startMetadataHelperIn is startMetadataHelper with the metadata files in runRoot (the
// plugin's --device-metadata-root).
func startMetadataHelperIn(t testing.TB, ctx context.Context, h *harness, d *Driver, name, runRoot string) (drapbv1.DRAPluginClient, string) {
	t.Helper()
	sockDir := filepath.Join(testRoot, name)
	dataDir := mkdir(t, sockDir+"d")
	// As run.go places them: the files in a directory of their own, linked from the
	// data directory.
	runDir := filepath.Join(runRoot, testDriver)
	if err := placeMetadata(dataDir, runDir); err != nil {
		t.Fatal(err)
	}
	helper, err := kubeletplugin.Start(ctx, d, append([]kubeletplugin.Option{
		kubeletplugin.DriverName(testDriver),
		kubeletplugin.NodeName(testNode),
		kubeletplugin.KubeClient(h.kube),
		kubeletplugin.RegistrarDirectoryPath(mkdir(t, sockDir+"r")),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
	}, deviceMetadataOptions(h.cdiDir)...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(helper.Stop)
	d.SetMetadataWriter(helper)
	d.metadataFiles = &MetadataFiles{DriverName: testDriver, CDIDir: h.cdiDir, DataDir: dataDir, RunDir: runDir}
	conn := dialHelper(t, sockDir+"d")
	return drapbv1.NewDRAPluginClient(conn), dataDir
}

// readMetadata decodes the metadata file of request in claim ns/name as a consumer in
// the container would: the first object of the stream it understands.
func readMetadata(t *testing.T, dataDir, name, request string) *metadata.DeviceMetadata {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, metadataSubDir, "ns_"+name, request, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dm metadata.DeviceMetadata
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(bytes.NewReader(data)), &dm); err != nil {
		t.Fatalf("decode metadata: %v\n%s", err, data)
	}
	return &dm
}

func strAttr(d metadata.Device, name string) string {
	if v, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return "<none>"
}

func intAttr(d metadata.Device, name string) int64 {
	if v, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && v.IntValue != nil {
		return *v.IntValue
	}
	return -1
}

// TestDeviceMetadata follows one RoCE claim with a macvlan attachment through the real
// helper: the prepare writes the published facts, the attachment rewrites them with the
// pod's view, a repeated prepare (a kubelet restart) keeps that view, and unprepare and
// the cleanup leave no file behind.
func TestDeviceMetadata(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	f := newFakeAttacher()
	d := h.networkDriver(f)
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	client, dataDir := startMetadataHelper(t, ctx, h, d, "md")

	a := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
		opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-a")
	plain := h.claim("plain", exclusive(1))
	prepare := func(c *resourceapi.ResourceClaim) *drapbv1.NodePrepareResourceResponse {
		t.Helper()
		ref := &drapbv1.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}
		resp, err := client.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{ref}})
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Claims[string(c.UID)]
		if got == nil || got.Error != "" || len(got.Devices) == 0 {
			t.Fatalf("prepare %s: %+v", c.Name, got)
		}
		return got
	}

	// The answer names the metadata's CDI device, and the file holds the published
	// attributes plus the uverbs device.
	resp := prepare(plain)
	if ids := resp.Devices[0].CdiDeviceIds; !slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, testDriver+"/metadata=") }) {
		t.Errorf("CDI devices %v name no metadata device", ids)
	}
	dm := readMetadata(t, dataDir, "plain", "rdma")
	// The helper wrote it through the link, into the metadata directory.
	if target, err := os.Readlink(filepath.Join(dataDir, metadataSubDir)); err != nil {
		t.Errorf("the metadata directory is not linked: %v", err)
	} else if _, err := os.Stat(filepath.Join(target, "ns_plain", "rdma", "metadata.json")); err != nil {
		t.Errorf("metadata file not in %s: %v", target, err)
	}
	if len(dm.Requests) != 1 || len(dm.Requests[0].Devices) != 1 {
		t.Fatalf("metadata of plain: %+v", dm)
	}
	dev := dm.Requests[0].Devices[0]
	wantUVerbs := uverbsOf(t, h, dev.Name)
	if dev.Driver != testDriver || dev.Pool != testPool || strAttr(dev, "ibdev") == "<none>" || strAttr(dev, metaUVerbs) != wantUVerbs || strAttr(dev, "link_layer") != "InfiniBand" {
		t.Errorf("metadata device of plain: %+v (want uverbs %s)", dev, wantUVerbs)
	}
	if dev.NetworkData != nil {
		t.Errorf("an InfiniBand claim without attachment has networkData %+v", dev.NetworkData)
	}

	// RoCE with an attachment: before the pod exists, the published facts without the
	// host's netdev and GID index, which are no use in the pod (its own are known after
	// the attachment).
	prepare(a)
	dev = readMetadata(t, dataDir, "a", "rdma").Requests[0].Devices[0]
	if strAttr(dev, "netdev") != "<none>" || intAttr(dev, "gid_index") != -1 || strAttr(dev, metaHostNetdev) != "enp168s0f0np0" || dev.NetworkData != nil {
		t.Errorf("metadata of a before the pod: netdev %s, gid_index %d, host_netdev %s, networkData %+v",
			strAttr(dev, "netdev"), intAttr(dev, "gid_index"), strAttr(dev, metaHostNetdev), dev.NetworkData)
	}
	if err := d.net.AttachPod(ctx, "pod-a", "ns/pod-a", "/var/run/netns/cni-pod-a"); err != nil {
		t.Fatal(err)
	}
	checkAttached := func(when string) {
		t.Helper()
		dm := readMetadata(t, dataDir, "a", "rdma")
		dev := dm.Requests[0].Devices[0]
		nd := dev.NetworkData
		if nd == nil || nd.InterfaceName != "rdma0" || !slices.Equal(nd.IPs, []string{"192.168.77.100/24"}) || nd.HardwareAddress != "02:00:00:00:00:01" {
			t.Errorf("%s: networkData %+v", when, nd)
		}
		if strAttr(dev, "netdev") != "rdma0" || strAttr(dev, metaHostNetdev) != "enp168s0f0np0" || intAttr(dev, "gid_index") != 7 {
			t.Errorf("%s: netdev %s, host_netdev %s, gid_index %d; want rdma0, enp168s0f0np0, 7", when,
				strAttr(dev, "netdev"), strAttr(dev, metaHostNetdev), intAttr(dev, "gid_index"))
		}
	}
	checkAttached("after the attachment")
	if dm := readMetadata(t, dataDir, "a", "rdma"); dm.Generation < 2 {
		t.Errorf("generation %d after the update, want at least 2", dm.Generation)
	}
	// The kubelet prepares again after it restarts: the pod's view stays.
	prepare(a)
	checkAttached("after a repeated prepare")

	// Unprepare through the helper removes the files of the claim.
	ref := &drapbv1.Claim{Namespace: a.Namespace, Name: a.Name, Uid: string(a.UID)}
	if _, err := client.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{ref}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, metadataSubDir, "ns_a")); !os.IsNotExist(err) {
		t.Errorf("metadata of a after unprepare: %v", err)
	}

	// A claim deleted without an unprepare: the cleanup takes its metadata with it.
	if err := h.kube.ResourceV1().ResourceClaims("ns").Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, metadataSubDir, "ns_plain")); !os.IsNotExist(err) {
		t.Errorf("metadata of a deleted claim after the cleanup: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(h.cdiDir, testDriver+"_metadata_*")); len(left) != 0 {
		t.Errorf("metadata CDI specs left: %v", left)
	}
}

func TestMetadataFilesRefuseBadInput(t *testing.T) {
	dir := t.TempDir()
	m := &MetadataFiles{DriverName: testDriver, CDIDir: dir, DataDir: dir}
	outside := filepath.Join(dir, "keep")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, uid, ns, claim, wantErr string
	}{
		{name: "uid with a path", uid: "../keep", wantErr: "UID"},
		{name: "namespace with a path", uid: "11111111-1111-4111-8111-111111111111", ns: "..", claim: "x/../../keep", wantErr: "not a valid name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := m.removeClaim(tc.uid, tc.ns, tc.claim)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("removeClaim(%q, %q, %q) = %v, want an error with %q", tc.uid, tc.ns, tc.claim, err, tc.wantErr)
			}
			if _, err := os.Stat(outside); err != nil {
				t.Errorf("a file outside the metadata directory went: %v", err)
			}
		})
	}
	var none *MetadataFiles
	if err := none.removeClaim("../x", "a", "b"); err != nil {
		t.Errorf("metadata off: %v", err)
	}
}
