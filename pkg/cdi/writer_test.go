package cdi

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
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
		two := append(one, exclusive("nic", ib("mlx5_1", 1, 1, 1), cfg(nil)))
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
