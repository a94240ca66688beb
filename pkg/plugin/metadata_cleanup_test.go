package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// TestCleanupKeepsMetadataOfNewerClaim deletes a prepared claim and creates one of the
// same name (another UID) in its place, whose device metadata shares the directory
// ns_<name>: the cleanup of the orphan removes the orphan's files only.
func TestCleanupKeepsMetadataOfNewerClaim(t *testing.T) {
	oldUID, newUID := string(uidFor("a")), string(uidFor("a-2"))
	tests := []struct {
		name string
		// files are the metadata files before the cleanup, path under the metadata
		// directory -> the claim UID the file records.
		files map[string]string
		want  []string
	}{
		{
			name:  "the orphan's own files go with their directories",
			files: map[string]string{"ns_a/rdma/metadata.json": oldUID},
		},
		{
			name:  "a newer claim's file stays",
			files: map[string]string{"ns_a/rdma/metadata.json": newUID},
			want:  []string{"ns_a/rdma/metadata.json"},
		},
		{
			name:  "of two requests only the orphan's goes",
			files: map[string]string{"ns_a/rdma/metadata.json": oldUID, "ns_a/other/metadata.json": newUID},
			want:  []string{"ns_a/other/metadata.json"},
		},
		{
			name: "a newer claim's file left aside by an interrupted cleanup is put back",
			files: map[string]string{
				"ns_a/rdma/" + atomicfile.TempPrefix(metadataFileName) + "cleanup": newUID,
			},
			want: []string{"ns_a/rdma/metadata.json"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			d := h.driver()
			dataDir := t.TempDir()
			d.metadataFiles = &MetadataFiles{DriverName: testDriver, CDIDir: h.cdiDir, DataDir: dataDir}
			old := h.claim("a", exclusive(1))
			if res := prepareOne(t, d, old); res.Err != nil {
				t.Fatal(res.Err)
			}
			if err := d.status.WaitIdle(h.ctx); err != nil {
				t.Fatal(err)
			}
			// The claim is deleted without an unprepare and created again.
			kube := h.kube.ResourceV1().ResourceClaims("ns")
			if err := kube.Delete(h.ctx, "a", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			again := old.DeepCopy()
			again.UID, again.ResourceVersion = uidFor("a-2"), ""
			if _, err := kube.Create(h.ctx, again, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(dataDir, metadataSubDir)
			for path, uid := range tc.files {
				writeMetadataFile(t, filepath.Join(root, path), uid)
			}
			if err := d.Cleanup(h.ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := h.checkpointClaims()[oldUID]; ok {
				t.Fatal("the orphan's entry is still there")
			}
			got := filesUnder(t, root)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("metadata files (-want +got):\n%s", diff)
			}
			for _, path := range got {
				if uid := recordedUID(t, filepath.Join(root, path)); uid != newUID {
					t.Errorf("%s records claim %s, want the newer claim %s", path, uid, newUID)
				}
			}
			if len(tc.want) == 0 {
				if _, err := os.Stat(filepath.Join(root, "ns_a")); !os.IsNotExist(err) {
					t.Errorf("the orphan's emptied directory is still there: %v", err)
				}
			}
		})
	}
}

// writeMetadataFile writes a metadata file as the helper does, as far as the cleanup
// reads it: a JSON stream whose objects carry the claim's UID.
func writeMetadataFile(t *testing.T, path, uid string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	obj := fmt.Sprintf(`{"kind":"DeviceMetadata","metadata":{"namespace":"ns","name":"a","uid":%q,"generation":1},"requests":[]}`, uid)
	if err := os.WriteFile(path, []byte(obj+"\n"+obj+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func recordedUID(t *testing.T, path string) string {
	t.Helper()
	uid, err := recordedClaimUID(path)
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// filesUnder lists the regular files below root, as slash paths relative to it.
func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
