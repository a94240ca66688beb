package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/claimstatus"
)

func TestPrepareExclusive(t *testing.T) {
	for _, n := range []int{1, 8} {
		t.Run(map[int]string{1: "one device", 8: "eight devices"}[n], func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			d := h.driver()
			claim := h.claim("c1", exclusive(n))
			res := prepareOne(t, d, claim)
			if res.Err != nil {
				t.Fatalf("prepare failed: %v", res.Err)
			}
			if len(res.Devices) != n {
				t.Fatalf("got %d devices, want %d", len(res.Devices), n)
			}
			for i, dev := range res.Devices {
				want := exclusive(n)[i].device
				wantID := cdi.QualifiedName(testDriver, string(claim.UID)+"-"+want)
				if dev.DeviceName != want || dev.PoolName != testPool || dev.ShareID != nil ||
					len(dev.CDIDeviceIDs) == 0 || dev.CDIDeviceIDs[0] != wantID || !cmp.Equal(dev.Requests, []string{"rdma"}) {
					t.Errorf("device %d: %+v, want %s with CDI ID %s", i, dev, want, wantID)
				}
			}
			if diff := cmp.Diff([]string{cdi.SpecFileName(testDriver, string(claim.UID))}, files(t, h.cdiDir)); diff != "" {
				t.Errorf("CDI dir (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]checkpoint.Phase{string(claim.UID): checkpoint.PhasePrepareCompleted}, h.checkpointClaims()); diff != "" {
				t.Errorf("checkpoint (-want +got):\n%s", diff)
			}
			checkStatus(t, h, claim, n)

			unprepareOne(t, d, claim)
			if got := files(t, h.cdiDir); len(got) != 0 {
				t.Errorf("CDI specs left after unprepare: %v", got)
			}
			if got := h.checkpointClaims(); len(got) != 0 {
				t.Errorf("checkpoint entries left after unprepare: %v", got)
			}
		})
	}
}

// checkStatus checks the claim's status.devices written by prepare.
func checkStatus(t *testing.T, h *harness, claim *resourceapi.ResourceClaim, n int) {
	t.Helper()
	got := waitForStatus(t, h, claim.Name)
	if len(got.Status.Devices) != n {
		t.Fatalf("status has %d devices, want %d", len(got.Status.Devices), n)
	}
	first := got.Status.Devices[0]
	if first.Driver != testDriver || first.Pool != testPool || first.Device != "mlx5-0-p1" {
		t.Errorf("status device 0 names %s/%s/%s", first.Driver, first.Pool, first.Device)
	}
	if len(first.Conditions) != 1 || first.Conditions[0].Type != claimstatus.ConditionReady || first.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("status conditions: %+v", first.Conditions)
	}
	var data v1alpha1.DeviceStatusData
	if first.Data == nil {
		t.Fatal("status device has no data")
	}
	if err := json.Unmarshal(first.Data.Raw, &data); err != nil {
		t.Fatal(err)
	}
	if data.IBDev != "mlx5_0" || data.Port != 1 || data.LinkLayer != "InfiniBand" || !strings.HasPrefix(data.UVerbs, "/dev/infiniband/uverbs") {
		t.Errorf("status data: %+v", data)
	}
}

// waitForStatus waits until the background writer wrote the claim's device status.
func waitForStatus(t *testing.T, h *harness, name string) *resourceapi.ResourceClaim {
	t.Helper()
	var got *resourceapi.ResourceClaim
	// On a timeout the claim is returned as it is: the caller says what is missing.
	testwait.Poll(func() bool {
		var err error
		if got, err = h.kube.ResourceV1().ResourceClaims("ns").Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		return len(got.Status.Devices) > 0
	})
	return got
}

func TestPrepareSharedWithShareIDs(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	shareA, shareB := "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	a := h.claim("a", []alloc{{request: "rdma", device: "mlx5-0-p1-shared", shareID: shareA}})
	b := h.claim("b", []alloc{{request: "rdma", device: "mlx5-0-p1-shared", shareID: shareB}})
	for _, tc := range []struct {
		claim *resourceapi.ResourceClaim
		share string
	}{{a, shareA}, {b, shareB}} {
		res := prepareOne(t, d, tc.claim)
		if res.Err != nil {
			t.Fatalf("prepare %s: %v", tc.claim.Name, res.Err)
		}
		dev := res.Devices[0]
		wantID := cdi.QualifiedName(testDriver, string(tc.claim.UID)+"-mlx5-0-p1-shared-"+tc.share)
		if dev.ShareID == nil || string(*dev.ShareID) != tc.share || dev.CDIDeviceIDs[0] != wantID {
			t.Errorf("claim %s: share %v, CDI IDs %v, want %s and %s", tc.claim.Name, dev.ShareID, dev.CDIDeviceIDs, tc.share, wantID)
		}
	}
	got := waitForStatus(t, h, "b")
	if len(got.Status.Devices) != 1 || got.Status.Devices[0].ShareID == nil || *got.Status.Devices[0].ShareID != shareB {
		t.Errorf("status of b: %+v", got.Status.Devices)
	}
}

func TestPrepareConfigs(t *testing.T) {
	class, claim := resourceapi.AllocationConfigSourceClass, resourceapi.AllocationConfigSourceClaim
	cfg := func(s string) string { return `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"` + s + `}` }
	tests := []struct {
		name    string
		configs []resourceapi.DeviceAllocationConfiguration
		// want is the merged config of request a's device and of request b's.
		want [2]v1alpha1.RdmaConfig
	}{
		{
			name: "defaults without config",
			want: [2]v1alpha1.RdmaConfig{merged(""), merged("")},
		},
		{
			name: "class first, claim over it, per request",
			configs: []resourceapi.DeviceAllocationConfiguration{
				opaque(class, cfg(`,"charDevices":"verbs","gidIndex":3`), "a"),
				opaque(class, cfg(`,"charDevices":"management"`), "b"),
				opaque(claim, cfg(`,"gidIndex":"none"`)),
				opaque(claim, cfg(`,"memlock":"unlimited"`), "b"),
			},
			want: [2]v1alpha1.RdmaConfig{
				merged(`,"charDevices":"verbs","gidIndex":"none"`),
				merged(`,"charDevices":"management","gidIndex":"none","memlock":"unlimited"`),
			},
		},
		{
			name: "configs of other drivers are ignored",
			configs: []resourceapi.DeviceAllocationConfiguration{{
				Source: claim,
				DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
					Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"anything":1}`)},
				}},
			}},
			want: [2]v1alpha1.RdmaConfig{merged(""), merged("")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			d := h.driver()
			c := h.claim("c", []alloc{{request: "a", device: "mlx5-0-p1"}, {request: "b", device: "mlx5-1-p1"}}, tc.configs...)
			_, devices, err := d.planDevices(c)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if diff := cmp.Diff(tc.want[i], devices[i].Config); diff != "" {
					t.Errorf("request %s (-want +got):\n%s", devices[i].Request, diff)
				}
			}
			if res := prepareOne(t, d, c); res.Err != nil {
				t.Errorf("prepare: %v", res.Err)
			}
		})
	}
}

// merged is the defaulted config with the given fields set.
func merged(fields string) v1alpha1.RdmaConfig {
	c, err := v1alpha1.DecodeConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"` + fields + `}`))
	if err != nil {
		panic(err)
	}
	return *v1alpha1.Merge(c)
}

func TestPrepareBadConfigs(t *testing.T) {
	class, claim := resourceapi.AllocationConfigSourceClass, resourceapi.AllocationConfigSourceClaim
	tests := []struct {
		name    string
		configs []resourceapi.DeviceAllocationConfiguration
		want    string
	}{
		{
			name:    "unknown field in claim config",
			configs: []resourceapi.DeviceAllocationConfiguration{opaque(claim, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIndx":3}`, "b")},
			want:    `request "b": invalid claim config: status.allocation.devices.config[0].opaque.parameters: decode RdmaConfig: unknown field "gidIndx"`,
		},
		{
			name:    "invalid value in class config",
			configs: []resourceapi.DeviceAllocationConfiguration{opaque(class, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIndex":300}`, "a")},
			want:    `request "a": invalid DeviceClass config: status.allocation.devices.config[0].opaque.parameters.gidIndex: Invalid value: "300": must be auto, none or a number from 0 to 255`,
		},
		{
			name: "wrong kind, reported once for two requests, and a second broken config",
			configs: []resourceapi.DeviceAllocationConfiguration{
				opaque(claim, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"NicConfig"}`),
				opaque(claim, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","charDevices":"all"}`, "b"),
			},
			want: `request "a": invalid claim config: status.allocation.devices.config[0].opaque.parameters: decode RdmaConfig: kind "NicConfig" is not supported, want "RdmaConfig"; ` +
				`request "b": invalid claim config: status.allocation.devices.config[1].opaque.parameters.charDevices: Unsupported value: "all": supported values: "verbs", "diagnostics", "management"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			d := h.driver()
			c := h.claim("c", []alloc{{request: "a", device: "mlx5-0-p1"}, {request: "b", device: "mlx5-1-p1"}}, tc.configs...)
			res := prepareOne(t, d, c)
			if res.Err == nil {
				t.Fatal("prepare accepted a bad config")
			}
			if res.Err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", res.Err, tc.want)
			}
			if got := files(t, h.cdiDir); len(got) != 0 {
				t.Errorf("a refused claim left CDI specs: %v", got)
			}
			if got := h.checkpointClaims(); len(got) != 0 {
				t.Errorf("a refused claim left checkpoint entries: %v", got)
			}
		})
	}
}

func TestPrepareUnknownDevice(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	c := h.claim("c", []alloc{{request: "rdma", device: "mlx5-42-p1"}})
	res := prepareOne(t, h.driver(), c)
	want := `request "rdma": device "mlx5-42-p1" of pool "node-1-rdma" is not a device of node node-1`
	if res.Err == nil || res.Err.Error() != want {
		t.Errorf("error %v, want %s", res.Err, want)
	}
}

func TestPrepareIdempotent(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	c := h.claim("c", exclusive(8))
	first := prepareOne(t, d, c)
	specPath := filepath.Join(h.cdiDir, cdi.SpecFileName(testDriver, string(c.UID)))
	before, err := os.Stat(specPath)
	if err != nil {
		t.Fatal(err)
	}
	cpBefore, err := os.ReadFile(filepath.Join(h.dataDir, checkpoint.FileName))
	if err != nil {
		t.Fatal(err)
	}
	filesBefore := [2][]string{files(t, h.cdiDir), files(t, h.dataDir)}
	// Again in the same process and in a new one.
	for _, drv := range []*Driver{d, h.driver()} {
		again := prepareOne(t, drv, c)
		if diff := cmp.Diff(first, again); diff != "" {
			t.Errorf("second answer differs (-first +second):\n%s", diff)
		}
	}
	after, _ := os.Stat(specPath)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("idempotent prepare rewrote the CDI spec")
	}
	cpAfter, _ := os.ReadFile(filepath.Join(h.dataDir, checkpoint.FileName))
	if string(cpAfter) != string(cpBefore) {
		t.Error("idempotent prepare changed the checkpoint")
	}
	if diff := cmp.Diff(filesBefore, [2][]string{files(t, h.cdiDir), files(t, h.dataDir)}); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}
}

func TestPrepareRefusesOverlap(t *testing.T) {
	shareA, shareB := "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	tests := []struct {
		name          string
		held, want    []alloc
		legacy        bool
		wantErrSubstr string
	}{
		{name: "exclusive twice", held: exclusive(1), want: exclusive(1),
			wantErrSubstr: `device "mlx5-0-p1" (mlx5_0 port 1) conflicts with device "mlx5-0-p1" prepared for claim ns/held (uid ` + string(uidFor("held")) + `): an exclusive device needs its port to itself`},
		{name: "exclusive on shared port", held: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: shareA}}, want: exclusive(1),
			wantErrSubstr: `conflicts with device "mlx5-0-p1-shared" prepared for claim ns/held`},
		{name: "share on exclusive port", held: exclusive(1), want: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: shareB}},
			wantErrSubstr: "the port is held exclusively"},
		{name: "same share twice", held: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: shareA}}, want: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: shareA}},
			wantErrSubstr: "the same device share is already in use"},
		{name: "legacy share twice", legacy: true, held: []alloc{{request: "r", device: "mlx5-0-p1-s3"}}, want: []alloc{{request: "r", device: "mlx5-0-p1-s3"}},
			wantErrSubstr: "the same device share is already in use"},
		{name: "two shares", held: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: shareA}}, want: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: shareB}}},
		{name: "two legacy shares", legacy: true, held: []alloc{{request: "r", device: "mlx5-0-p1-s3"}}, want: []alloc{{request: "r", device: "mlx5-0-p1-s4"}}},
		{name: "other port", held: exclusive(1), want: []alloc{{request: "r", device: "mlx5-1-p1"}}},
		{name: "admin access", held: exclusive(1), want: []alloc{{request: "r", device: "mlx5-0-p1", admin: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			d := h.driver()
			held := prepareOne(t, d, h.claim("held", tc.held))
			if held.Err != nil {
				t.Fatal(held.Err)
			}
			c := h.claim("new", tc.want)
			res := prepareOne(t, d, c)
			switch {
			case tc.wantErrSubstr == "" && res.Err != nil:
				t.Fatalf("refused: %v", res.Err)
			case tc.wantErrSubstr != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), tc.wantErrSubstr)):
				t.Fatalf("error %v, want one containing %q", res.Err, tc.wantErrSubstr)
			case tc.wantErrSubstr != "":
				if got := h.checkpointClaims(); len(got) != 1 {
					t.Errorf("refused claim recorded: %v", got)
				}
			}
		})
	}
}

func TestPrepareOverlapWithinOneCall(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	a, b := h.claim("a", exclusive(1)), h.claim("b", exclusive(1))
	res, err := h.driver().PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if res[a.UID].Err != nil || res[b.UID].Err == nil {
		t.Errorf("want a prepared and b refused, got %v and %v", res[a.UID].Err, res[b.UID].Err)
	}
}

func TestUnprepareUnknownClaim(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	unprepareOne(t, d, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "never", UID: uidFor("never")}})
	if _, err := os.Stat(filepath.Join(h.dataDir, checkpoint.FileName)); err != nil {
		t.Errorf("checkpoint: %v", err)
	}
	if got := h.checkpointClaims(); len(got) != 0 {
		t.Errorf("entries: %v", got)
	}
}

func TestPrepareStatusForbiddenIsTolerated(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	h.kube.PrependReactor("patch", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims/status"}, "c", nil)
	})
	res := prepareOne(t, h.driver(), h.claim("c", exclusive(1)))
	if res.Err != nil {
		t.Fatalf("prepare failed because of claim status: %v", res.Err)
	}
}
