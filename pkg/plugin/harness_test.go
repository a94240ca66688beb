package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

const (
	testHookPath = "/var/lib/rdma-dra/bin/rdma-dra-cdi-hook"
	testDriver   = devicemodel.DefaultDriverName
	testNode     = "node-1"
	testPool     = testNode + devicemodel.PoolSuffix
)

// harness is one node: a mock sysfs tree, a publisher built from it, a fake API server,
// a CDI directory and a plugin data directory. Drivers made from the same harness share
// the directories, as a restarted plugin process would.
type harness struct {
	t        testing.TB
	ctx      context.Context
	dataDir  string
	cdiDir   string
	bootPath string
	kube     *fake.Clientset
	pub      *publish.Publisher
	sink     *recordingSink
	clock    *testclock.FakeClock
}

func newHarness(t testing.TB, profile string) *harness {
	t.Helper()
	return newHarnessWithConfig(t, profile, nodeconfig.Config{})
}

// newHarnessWithConfig is newHarness with a node configuration.
func newHarnessWithConfig(t testing.TB, profile string, cfg nodeconfig.Config) *harness {
	t.Helper()
	node := mockNode(t, profile)
	h := &harness{
		t:        t,
		dataDir:  t.TempDir(),
		cdiDir:   t.TempDir(),
		bootPath: filepath.Join(t.TempDir(), "boot_id"),
		kube:     fake.NewClientset(),
		sink:     &recordingSink{},
		clock:    testclock.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)),
	}
	if tt, ok := t.(*testing.T); ok {
		_, h.ctx = ktesting.NewTestContext(tt)
	} else {
		h.ctx = context.Background()
	}
	h.setBootID("boot-1")
	h.pub = publish.New(discovery.New(discovery.Options{SysfsRoot: filepath.Join(node, mocknode.SysDir)}),
		devicemodel.Options{DriverName: testDriver, NodeName: testNode, Config: cfg}, publish.ModelAuto, publish.Options{})
	h.pub.SetSink(h.sink)
	if err := h.pub.Sync(h.ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) setBootID(id string) {
	if err := os.WriteFile(h.bootPath, []byte(id+"\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// mockNodes caches written mock nodes by profile: writing one takes seconds on a slow
// disk, and the plugin only reads it.
var mockNodes = struct {
	sync.Mutex
	dirs map[string]string
}{dirs: map[string]string{}}

// mockNode returns the directory of a written mock node of profile.
func mockNode(t testing.TB, profile string) string {
	t.Helper()
	mockNodes.Lock()
	defer mockNodes.Unlock()
	if dir, ok := mockNodes.dirs[profile]; ok {
		return dir
	}
	dir := filepath.Join(testRoot, profile)
	if err := mocknode.WriteProfile(profile, dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	mockNodes.dirs[profile] = dir
	return dir
}

// testRoot holds what tests share; TestMain removes it.
var testRoot string

func TestMain(m *testing.M) {
	var err error
	testRoot, err = os.MkdirTemp("", "plugin-test-")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(testRoot)
	os.Exit(code)
}

// driver returns a fresh driver on the harness's directories, like a new process.
func (h *harness) driver() *Driver {
	h.t.Helper()
	d, err := h.newDriver()
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.t.Cleanup(cancel)
	go d.RunStatusWriter(ctx)
	return d
}

func (h *harness) newDriver() (*Driver, error) {
	return NewDriver(h.ctx, DriverOptions{
		DriverName:      testDriver,
		NodeName:        testNode,
		Kube:            h.kube,
		Store:           checkpoint.NewStore(h.dataDir, h.bootPath),
		Specs:           cdi.NewWriter(cdi.Options{SpecDir: h.cdiDir, DevRoot: "/dev", HookPath: testHookPath, Exists: func(string) bool { return true }}),
		Devices:         h.pub,
		Clock:           h.clock,
		OnDroppedFields: h.pub.HandleDroppedFields,
		DeviceCounts:    h.pub.DeviceCounts,
		CleanupGrace:    -1,
	})
}

// alloc is one allocated device of a test claim.
type alloc struct {
	request, device, shareID string
	admin                    bool
}

// claim creates an allocated claim in the fake API server and returns it.
func (h *harness) claim(name string, devices []alloc, configs ...resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	h.t.Helper()
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uidFor(name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Config: configs},
		}},
	}
	for _, a := range devices {
		r := resourceapi.DeviceRequestAllocationResult{Request: a.request, Driver: testDriver, Pool: testPool, Device: a.device}
		if a.shareID != "" {
			id := types.UID(a.shareID)
			r.ShareID = &id
		}
		if a.admin {
			r.AdminAccess = &a.admin
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	created, err := h.kube.ResourceV1().ResourceClaims(c.Namespace).Create(h.ctx, c, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return created
}

func exclusive(n int) []alloc {
	var out []alloc
	for i := range n {
		out = append(out, alloc{request: "rdma", device: devicemodel.DeviceName("mlx5_"+strconv.Itoa(i), 1)})
	}
	return out
}

// uidFor makes a stable UUID from a name; the CDI writer accepts UUIDs only.
func uidFor(name string) types.UID {
	return types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", crc32.ChecksumIEEE([]byte(name)), len(name)))
}

// opaque is a config of the driver with the given JSON parameters.
func opaque(source resourceapi.AllocationConfigSource, params string, requests ...string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{
		Source:   source,
		Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: testDriver, Parameters: runtime.RawExtension{Raw: []byte(params)},
		}},
	}
}

func prepareOne(t testing.TB, d *Driver, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	r, ok := res[claim.UID]
	if !ok || len(res) != 1 {
		t.Fatalf("prepare answered %d claims, want exactly %s", len(res), claim.UID)
	}
	return r
}

func unprepareOne(t testing.TB, d *Driver, claim *resourceapi.ResourceClaim) {
	t.Helper()
	res, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{
		UID: claim.UID, NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name},
	}})
	if err != nil {
		t.Fatalf("unprepare: %v", err)
	}
	if e, ok := res[claim.UID]; !ok || e != nil {
		t.Fatalf("unprepare of %s: present %v, error %v", claim.UID, ok, e)
	}
}

// files lists the names in dir, sorted.
func files(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// checkpointClaims returns the checkpoint's entries by UID with their phases.
func (h *harness) checkpointClaims() map[string]checkpoint.Phase {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.dataDir, checkpoint.FileName))
	if os.IsNotExist(err) {
		return map[string]checkpoint.Phase{}
	}
	if err != nil {
		h.t.Fatal(err)
	}
	var cp checkpoint.Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]checkpoint.Phase{}
	for uid, c := range cp.Claims {
		out[uid] = c.Phase
	}
	return out
}

// recordingSink records what would be published.
type recordingSink struct {
	mu        sync.Mutex
	published []resourceslice.DriverResources
}

func (s *recordingSink) PublishResources(_ context.Context, r resourceslice.DriverResources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published = append(s.published, r)
	return nil
}

// snapshot returns the publishes so far; the publisher's loop may be adding one.
func (s *recordingSink) snapshot() []resourceslice.DriverResources {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]resourceslice.DriverResources(nil), s.published...)
}

// startHelper serves d through the real kubeletplugin helper on unix sockets below
// testRoot/<name> (socket paths are limited to 108 bytes; t.TempDir may be long) and returns
// a client connection to its DRA socket. Both are closed when the test ends.
func startHelper(t *testing.T, ctx context.Context, d kubeletplugin.DRAPlugin, kube kubernetes.Interface, name string, health bool) *grpc.ClientConn {
	t.Helper()
	sockDir := filepath.Join(testRoot, name)
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(testDriver),
		kubeletplugin.NodeName(testNode),
		kubeletplugin.KubeClient(kube),
		kubeletplugin.RegistrarDirectoryPath(mkdir(t, sockDir+"r")),
		kubeletplugin.PluginDataDirectoryPath(mkdir(t, sockDir+"d")),
		kubeletplugin.HealthService(health),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(helper.Stop)
	return dialHelper(t, sockDir+"d")
}

// dialHelper connects to the DRA socket of a helper whose plugin data directory is dir.
func dialHelper(t testing.TB, dir string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
