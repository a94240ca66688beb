package cdi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

const otherClaimUID = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWrite(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := filepath.Join(t.TempDir(), "cdi") // Write creates it
	w := NewWriter(Options{SpecDir: dir, Exists: func(string) bool { return true }})
	one := []ClaimDevice{exclusive("nic", ib("mlx5_0", 1, 0, 0), cfg(nil))}
	path := filepath.Join(dir, "k8s.rdma.dra.io-hca_"+testClaimUID+".json")

	if _, err := w.Write(ctx, testClaimUID, one); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if diff := cmp.Diff([]string{filepath.Base(path)}, listDir(t, dir)); diff != "" {
		t.Errorf("directory holds more than the spec (-want +got):\n%s", diff)
	}

	t.Run("same content leaves the file alone", func(t *testing.T) {
		if _, err := w.Write(ctx, testClaimUID, one); err != nil {
			t.Fatal(err)
		}
		again, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if again.Sys().(*syscall.Stat_t).Ino != st.Sys().(*syscall.Stat_t).Ino {
			t.Errorf("file was replaced although its content did not change")
		}
	})
	t.Run("new content replaces the file", func(t *testing.T) {
		two := append(slices.Clone(one), exclusive("nic", ib("mlx5_1", 1, 1, 1), cfg(nil)))
		if _, err := w.Write(ctx, testClaimUID, two); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "mlx5-1-p1") {
			t.Errorf("spec was not rewritten:\n%s", data)
		}
		if n := len(listDir(t, dir)); n != 1 {
			t.Errorf("%d files in the spec dir, want 1", n)
		}
	})
	t.Run("error leaves the old file", func(t *testing.T) {
		before, _ := os.ReadFile(path)
		if _, err := w.Write(ctx, testClaimUID, nil); err == nil || err.Error() != "build CDI spec: claim has no devices" {
			t.Fatalf("error %v", err)
		}
		after, _ := os.ReadFile(path)
		if string(before) != string(after) {
			t.Errorf("a failed write changed the spec")
		}
	})
}

func TestWriteSpecFileRefusesInvalidSpec(t *testing.T) {
	dir := t.TempDir()
	err := writeSpecFile(dir, "x.json", []byte(`{"cdiVersion":"0.5.0","kind":"k8s.rdma.dra.io/hca","devices":[]}`))
	if err == nil || !strings.HasPrefix(err.Error(), "validate CDI spec: ") {
		t.Fatalf("error %v, want a validation error", err)
	}
	if names := listDir(t, dir); len(names) != 0 {
		t.Errorf("left behind %v", names)
	}
}

// TestWriteValidatesEachShapeOnce: the CDI library validates a spec once per content up
// to the claim's UUIDs (specKey); claims and shares of new UUIDs on the same ports with
// the same configs are written without it, anything else is validated, and a spec that
// was refused is validated again the next time.
func TestWriteValidatesEachShapeOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	w := NewWriter(Options{SpecDir: dir, Exists: func(string) bool { return true }})
	validated := 0
	refuse := false
	w.validate = func(tmp string) error {
		validated++
		if refuse {
			return errors.New("refused")
		}
		return validateSpecFile(tmp)
	}
	share := func(i int) string { return fmt.Sprintf("%08d-0000-4000-8000-000000000000", i) }
	claim := func(i int) string { return fmt.Sprintf("%08d-1111-4111-8111-111111111111", i) }
	port0, port1 := ib("mlx5_0", 1, 0, 0), ib("mlx5_1", 1, 1, 1)
	steps := []struct {
		name      string
		claimUID  string
		devices   []ClaimDevice
		refuse    bool
		validated int // the count after the step
		wantErr   bool
	}{
		{"first claim", claim(1), []ClaimDevice{shared("rdma", share(1), port0, cfg(nil))}, false, 1, false},
		{"another claim and share", claim(2), []ClaimDevice{shared("rdma", share(2), port0, cfg(nil))}, false, 1, false},
		{"another port", claim(3), []ClaimDevice{shared("rdma", share(3), port1, cfg(nil))}, false, 2, false},
		{"two shares", claim(4), []ClaimDevice{shared("rdma", share(4), port0, cfg(nil)), shared("rdma", share(5), port1, cfg(nil))}, false, 3, false},
		{"two shares again", claim(5), []ClaimDevice{shared("rdma", share(6), port0, cfg(nil)), shared("rdma", share(7), port1, cfg(nil))}, false, 3, false},
		{"another config", claim(6), []ClaimDevice{shared("rdma", share(8), port0, cfg(func(c *v1alpha1.RdmaConfig) {
			m := v1alpha1.MemlockUnlimited
			c.Memlock = &m
		}))}, true, 4, true},
		{"refused before", claim(7), []ClaimDevice{shared("rdma", share(9), port0, cfg(func(c *v1alpha1.RdmaConfig) {
			m := v1alpha1.MemlockUnlimited
			c.Memlock = &m
		}))}, false, 5, false},
	}
	w.opts.HookPath = "/opt/hook"
	for _, st := range steps {
		refuse = st.refuse
		_, err := w.Write(ctx, st.claimUID, st.devices)
		if (err != nil) != st.wantErr {
			t.Errorf("%s: error %v, want one: %v", st.name, err, st.wantErr)
		}
		if validated != st.validated {
			t.Errorf("%s: %d validations so far, want %d", st.name, validated, st.validated)
		}
	}
}

// TestSpecKey: keys are equal exactly when the specs are the same up to a one-to-one
// renaming of the claim UID and share IDs.
func TestSpecKey(t *testing.T) {
	const a, b, c = "aaaaaaaa-0000-4000-8000-000000000000", "bbbbbbbb-0000-4000-8000-000000000000", "cccccccc-0000-4000-8000-000000000000"
	dev := func(shareID string) ClaimDevice { return ClaimDevice{Device: "d", ShareID: shareID} }
	key := func(spec, claimUID string, shares ...string) string {
		t.Helper()
		var devices []ClaimDevice
		for _, s := range shares {
			devices = append(devices, dev(s))
		}
		k, ok := specKey([]byte(spec), claimUID, devices)
		if !ok {
			return "none"
		}
		return fmt.Sprintf("%x", k)
	}
	tests := []struct {
		name  string
		x, y  string
		equal bool
	}{
		{"claim renamed", key(a+"-d "+b, a, b), key(b+"-d "+c, b, c), true},
		{"shares swapped", key(a+" "+b+" "+c, a, b, c), key(a+" "+c+" "+b, a, c, b), true},
		{"two shares made one", key(a+" "+b+" "+c, a, b, c), key(a+" "+b+" "+b, a, b, b), false},
		{"other content", key(a+"-d", a), key(a+"-e", a), false},
		{"a placeholder in the spec", key("zzzzzzzz-zzzz-zzzz-zzzz-000000000000", a), "none", true},
	}
	for _, tt := range tests {
		if (tt.x == tt.y) != tt.equal {
			t.Errorf("%s: keys %s and %s, want equal: %v", tt.name, tt.x, tt.y, tt.equal)
		}
	}
}

func TestRemoveAndList(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	w := NewWriter(Options{SpecDir: dir, Exists: func(string) bool { return true }})
	one := []ClaimDevice{exclusive("nic", ib("mlx5_0", 1, 0, 0), cfg(nil))}
	for _, uid := range []string{otherClaimUID, testClaimUID} {
		if _, err := w.Write(ctx, uid, one); err != nil {
			t.Fatal(err)
		}
	}
	// What List must skip: other vendors, our prefix without a UUID, a crash's leftover,
	// a directory.
	for _, name := range []string{
		"nvidia.com-gpu_" + otherClaimUID + ".json",
		"k8s.rdma.dra.io-hca_not-a-uid.json",
		"k8s.rdma.dra.io-hca_" + testClaimUID + ".yaml",
		".k8s.rdma.dra.io-hca_" + testClaimUID + ".json.123.tmp",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "k8s.rdma.dra.io-hca_"+otherClaimUID+"x.json"), 0o755); err != nil {
		t.Fatal(err)
	}

	list := func() []string {
		t.Helper()
		uids, err := w.List()
		if err != nil {
			t.Fatal(err)
		}
		return uids
	}
	if diff := cmp.Diff([]string{testClaimUID, otherClaimUID}, list()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if err := w.Remove(ctx, testClaimUID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{otherClaimUID}, list()); diff != "" {
		t.Errorf("List after Remove (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, ".k8s.rdma.dra.io-hca_"+testClaimUID+".json.123.tmp")); !os.IsNotExist(err) {
		t.Errorf("Remove left the claim's temporary file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "k8s.rdma.dra.io-hca_"+testClaimUID+".yaml")); err != nil {
		t.Errorf("Remove touched a file it did not write: %v", err)
	}
	if err := w.Remove(ctx, testClaimUID); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if err := w.Remove(ctx, "../"+testClaimUID); err == nil {
		t.Errorf("Remove accepted a path as claim UID")
	}

	missing := NewWriter(Options{SpecDir: filepath.Join(dir, "nope")})
	if uids, err := missing.List(); err != nil || len(uids) != 0 {
		t.Errorf("List of a missing dir = %v, %v; want nothing", uids, err)
	}
}

// TestTwoInstallationsAreIndependent: two installations of the driver (different driver
// names) write specs of the same claim into one CDI directory. Each must keep its own
// spec (a claim with devices of both gets two), list only its own and remove only its
// own; the default driver keeps the names of earlier versions.
func TestTwoInstallationsAreIndependent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	exists := func(string) bool { return true }
	first := NewWriter(Options{SpecDir: dir, Exists: exists})
	second := NewWriter(Options{SpecDir: dir, DriverName: "rdma.example.com", Exists: exists})
	one := []ClaimDevice{exclusive("nic", ib("mlx5_0", 1, 0, 0), cfg(nil))}
	two := []ClaimDevice{exclusive("nic", ib("mlx5_1", 1, 0, 1), cfg(nil))}

	ids1, err := first.Write(ctx, testClaimUID, one)
	if err != nil {
		t.Fatal(err)
	}
	ids2, err := second.Write(ctx, testClaimUID, two)
	if err != nil {
		t.Fatal(err)
	}
	if want := "k8s.rdma.dra.io/hca=" + testClaimUID + "-mlx5-0-p1"; ids1[0][0] != want {
		t.Errorf("default driver's CDI ID %q, want the name of earlier versions %q", ids1[0][0], want)
	}
	if want := "k8s.rdma.example.com/hca=" + testClaimUID + "-mlx5-1-p1"; ids2[0][0] != want {
		t.Errorf("second driver's CDI ID %q, want %q", ids2[0][0], want)
	}
	want := []string{
		"k8s.rdma.dra.io-hca_" + testClaimUID + ".json",
		"k8s.rdma.example.com-hca_" + testClaimUID + ".json",
	}
	if diff := cmp.Diff(want, listDir(t, dir)); diff != "" {
		t.Fatalf("spec files (-want +got):\n%s", diff)
	}
	// The runtime's view: both kinds resolve, each to its own port.
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{ids1[0][0], ids2[0][0]} {
		if cache.GetDevice(id) == nil {
			t.Errorf("CDI device %s does not resolve; cache errors: %v", id, cache.GetErrors())
		}
	}
	for _, w := range []*Writer{first, second} {
		if diff := cmp.Diff([]string{testClaimUID}, mustList(t, w)); diff != "" {
			t.Errorf("List of %s (-want +got):\n%s", w.opts.DriverName, diff)
		}
	}
	// Removing the second installation's spec leaves the first's.
	if err := second.Remove(ctx, testClaimUID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[:1], listDir(t, dir)); diff != "" {
		t.Errorf("after the second installation removed its spec (-want +got):\n%s", diff)
	}
	if ok, err := first.Exists(testClaimUID); !ok || err != nil {
		t.Errorf("first installation's spec: exists %v, %v", ok, err)
	}
	if ok, err := second.Exists(testClaimUID); ok || err != nil {
		t.Errorf("second installation's spec: exists %v, %v; want removed", ok, err)
	}
}

func mustList(t *testing.T, w *Writer) []string {
	t.Helper()
	uids, err := w.List()
	if err != nil {
		t.Fatal(err)
	}
	return uids
}
