package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

func newTestStore(t *testing.T, bootID string) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	bootPath := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(bootPath, []byte(bootID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(dir, bootPath)
	s.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	return s, dir
}

// testUID turns a short name into a UUID, which checkpoint keys must be.
func testUID(name string) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", crc32.ChecksumIEEE([]byte(name)), len(name))
}

func sampleClaim(uid string, phase Phase) *Claim {
	return &Claim{
		UID: uid, Namespace: "ns", Name: "c-" + uid, Phase: phase,
		Devices: []Device{{
			Request: "rdma", Pool: "node-rdma", Device: "mlx5-0-p1", PortKey: "mlx5_0/1",
			Exclusive: true, IBDev: "mlx5_0", Port: 1, CDIDeviceIDs: []string{"k8s.rdma.dra.io/hca=" + uid + "-mlx5-0-p1"},
		}},
		UpdatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Network: &Network{Version: NetworkVersion, Pods: []string{"pod-1"}, Devices: []NetworkDevice{{
			Request: "rdma", Pool: "node-rdma", Device: "mlx5-0-p1", IBDev: "mlx5_0", Port: 1,
			Attachments: []PodAttachment{{Pod: "pod-1", State: netattach.State{Phase: netattach.PhaseAttached}}},
		}}},
	}
}

func load(t *testing.T, s *Store) (Loaded, error) {
	t.Helper()
	unlock, err := s.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	return s.Load()
}

func TestSaveLoadRoundTrip(t *testing.T) {
	s, dir := newTestStore(t, "boot-a")
	got, err := load(t, s)
	if err != nil {
		t.Fatalf("load of a missing file: %v", err)
	}
	if len(got.Checkpoint.Claims) != 0 || got.Checkpoint.BootID != "boot-a" {
		t.Fatalf("missing file should load as empty checkpoint of this boot, got %+v", got.Checkpoint)
	}
	cp := got.Checkpoint
	cp.Claims[testUID("u1")] = sampleClaim(testUID("u1"), PhasePrepareCompleted)
	cp.Claims[testUID("u2")] = sampleClaim(testUID("u2"), PhasePrepareStarted)
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	again, err := load(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cp, again.Checkpoint); diff != "" {
		t.Errorf("round trip (-saved +loaded):\n%s", diff)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestLoadRejectsAndRecovers(t *testing.T) {
	tests := []struct {
		name          string
		content       string
		wantErr       error
		wantQuarantin bool
	}{
		{name: "not json", content: "{garbage", wantQuarantin: true},
		{name: "truncated", content: `{"version":1,"bootID":"boot-a","claims":{"u1":{"uid":"u1"`, wantQuarantin: true},
		{name: "version zero", content: `{"version":0,"claims":{}}`, wantQuarantin: true},
		{name: "entry under other uid", content: `{"version":1,"bootID":"boot-a","claims":{"u1":{"uid":"u2","phase":"PrepareStarted"}}}`, wantQuarantin: true},
		{name: "unknown phase", content: `{"version":1,"bootID":"boot-a","claims":{"u1":{"uid":"u1","phase":"Halfway"}}}`, wantQuarantin: true},
		// Recovery of a later boot could not remove anything by this key: a file name.
		{name: "key is not a UUID", content: `{"version":1,"bootID":"boot-old","claims":{"../x":{"uid":"../x","phase":"PrepareCompleted"}}}`, wantQuarantin: true},
		{name: "future version", content: `{"version":2,"anything":"else"}`, wantErr: ErrFutureVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newTestStore(t, "boot-a")
			if err := os.WriteFile(s.Path(), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := load(t, s)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("want error %v, got %v", tc.wantErr, err)
				}
				if !strings.Contains(err.Error(), s.Path()) {
					t.Errorf("error %q does not name the file", err)
				}
				data, _ := os.ReadFile(s.Path())
				if string(data) != tc.content {
					t.Errorf("a newer checkpoint must be left untouched, now %q", data)
				}
				return
			}
			if err != nil {
				t.Fatalf("corrupted file should be moved aside, got error %v", err)
			}
			want := filepath.Join(dir, "checkpoint.json.corrupt-20260102T030405Z")
			if got.QuarantinedTo != want {
				t.Errorf("quarantined to %q, want %q", got.QuarantinedTo, want)
			}
			if data, err := os.ReadFile(want); err != nil || string(data) != tc.content {
				t.Errorf("quarantined file holds %q (%v), want the original", data, err)
			}
			if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("checkpoint still in place: %v", err)
			}
			if len(got.Checkpoint.Claims) != 0 || !errors.Is(got.Corruption, ErrCorrupt) {
				t.Errorf("want empty checkpoint and ErrCorrupt, got %+v", got)
			}
		})
	}
}

func TestLoadDropsEntriesOfEarlierBoot(t *testing.T) {
	s, _ := newTestStore(t, "boot-a")
	cp := New("boot-a")
	cp.Claims[testUID("u2")] = sampleClaim(testUID("u2"), PhasePrepareStarted)
	cp.Claims[testUID("u1")] = sampleClaim(testUID("u1"), PhasePrepareCompleted)
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	rebooted := NewStore(filepath.Dir(s.Path()), filepath.Join(t.TempDir(), "boot_id"))
	if err := os.WriteFile(rebooted.bootIDPath, []byte("boot-b"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := load(t, rebooted)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Checkpoint.Claims) != 0 || got.Checkpoint.BootID != "boot-b" {
		t.Errorf("entries of boot-a survived: %+v", got.Checkpoint)
	}
	var stale []string
	for _, c := range got.Stale {
		stale = append(stale, c.UID)
	}
	want := []string{testUID("u1"), testUID("u2")}
	slices.Sort(want)
	if diff := cmp.Diff(want, stale); diff != "" {
		t.Errorf("stale entries (-want +got):\n%s", diff)
	}
}

func TestClonePreservesAndIsolates(t *testing.T) {
	c := sampleClaim("u1", PhasePrepareCompleted)
	d := c.Clone()
	if diff := cmp.Diff(c, d); diff != "" {
		t.Fatalf("clone differs:\n%s", diff)
	}
	d.Devices[0].CDIDeviceIDs[0] = "changed"
	d.Network.Pods[0] = "changed"
	if c.Devices[0].CDIDeviceIDs[0] == "changed" || c.Network.Pods[0] == "changed" {
		t.Error("clone shares memory with the original")
	}
}

func TestBootIDErrors(t *testing.T) {
	s := NewStore(t.TempDir(), filepath.Join(t.TempDir(), "missing"))
	if _, err := s.BootID(); err == nil {
		t.Error("missing boot ID file accepted")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(t.TempDir(), empty).BootID(); err == nil {
		t.Error("empty boot ID accepted")
	}
}

// TestLoadRemovesLeftoverTempFiles: the temporary files of saves that a crash interrupted
// are removed by the next load, and nothing else in the directory is touched.
func TestLoadRemovesLeftoverTempFiles(t *testing.T) {
	s, dir := newTestStore(t, "boot-a")
	cp := New("boot-a")
	cp.Claims[testUID("u1")] = sampleClaim(testUID("u1"), PhasePrepareCompleted)
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	keep := []string{FileName, FileName + ".corrupt-20260102T030405Z", ".other.json.123.tmp", "notes.tmp"}
	for _, name := range append(keep[1:], "."+FileName+".123.tmp", "."+FileName+".456.tmp") {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := load(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cp, got.Checkpoint); diff != "" {
		t.Errorf("loaded (-saved +loaded):\n%s", diff)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != lockFileName {
			names = append(names, e.Name())
		}
	}
	slices.Sort(keep)
	if !slices.Equal(names, keep) {
		t.Errorf("directory holds %v, want %v", names, keep)
	}
}

// TestSaveReusesOneSpare: saves leave one more file next to the checkpoint, the file the
// last save replaced, which the next save writes over (atomicfile.Spare) rather than
// creating a file; a spare that a crash left half written is never read, and the next
// save (a restarted plugin's) writes it over whole.
func TestSaveReusesOneSpare(t *testing.T) {
	s, dir := newTestStore(t, "boot-a")
	var uids []string
	add := func(s *Store, uid string) {
		t.Helper()
		uids = append(uids, uid)
		if err := s.Update(func(cp *Checkpoint) (bool, error) {
			cp.Claims[uid] = sampleClaim(uid, PhasePrepareStarted)
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	for i := range 5 {
		add(s, testUID(fmt.Sprint("u", i)))
	}
	if got, want := names(), []string{FileName, lockFileName, spareFileName}; !slices.Equal(got, want) {
		t.Fatalf("directory holds %v after five saves, want %v", got, want)
	}
	// A crash half way through the next save.
	spare := filepath.Join(dir, spareFileName)
	if err := os.WriteFile(spare, []byte(`{"version":1,"bootID":"boot-a","cla`), 0o600); err != nil {
		t.Fatal(err)
	}
	restarted := NewStore(dir, s.bootIDPath)
	add(restarted, testUID("after"))
	got, err := load(t, restarted)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Checkpoint.Claims) != len(uids) {
		t.Errorf("%d claims after the restart, want %d", len(got.Checkpoint.Claims), len(uids))
	}
	for _, uid := range uids {
		if got.Checkpoint.Claims[uid] == nil {
			t.Errorf("claim %s lost", uid)
		}
	}
	// The spare now holds what the save replaced, the checkpoint before it.
	if data, err := os.ReadFile(spare); err != nil || !json.Valid(data) {
		t.Errorf("spare after the restart's save: %q (%v), want the replaced checkpoint", data, err)
	}
}

// TestReadFile reads files of sizes around its buffer's with and without a size hint,
// and a missing file as fs.ErrNotExist.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 511, 512, 513, 1024, 5000} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte('a' + i%26)
		}
		path := filepath.Join(dir, fmt.Sprint(size))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, hint := range []int{0, size, size / 2} {
			got, err := readFile(path, hint)
			if err != nil || string(got) != string(data) {
				t.Errorf("size %d, hint %d: read %d bytes (%v), want the file's %d", size, hint, len(got), err, size)
			}
		}
	}
	if _, err := readFile(filepath.Join(dir, "missing"), 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}
