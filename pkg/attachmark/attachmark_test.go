package attachmark

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	podA   = "11111111-1111-4111-8111-111111111111"
	podB   = "22222222-2222-4222-8222-222222222222"
	claimX = "33333333-3333-4333-8333-333333333333"
	claimY = "44444444-4444-4444-8444-444444444444"
)

func TestMarks(t *testing.T) {
	dir := Dir(t.TempDir())
	marked := func(pod, claim string) bool {
		t.Helper()
		ok, err := Marked(dir, pod, claim)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if marked(podA, claimX) {
		t.Fatal("marked before anything was written (and the directory does not exist)")
	}
	for _, m := range [][2]string{{podA, claimX}, {podB, claimX}, {podA, claimY}} {
		if err := Mark(dir, m[0], m[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := Mark(dir, podA, claimX); err != nil {
		t.Fatalf("marking twice: %v", err)
	}
	if err := Unmark(dir, podA, claimY); err != nil {
		t.Fatal(err)
	}
	if err := Unmark(dir, podA, claimY); err != nil {
		t.Fatalf("unmarking twice: %v", err)
	}
	if err := UnmarkClaim(dir, claimX); err != nil {
		t.Fatal(err)
	}
	for _, m := range [][2]string{{podA, claimX}, {podB, claimX}, {podA, claimY}} {
		if marked(m[0], m[1]) {
			t.Errorf("%s in %s still marked", m[1], m[0])
		}
	}
	if err := UnmarkClaim(filepath.Join(dir, "missing"), claimX); err != nil {
		t.Errorf("no directory: %v", err)
	}
}

func TestMarksRefuseNonUUIDs(t *testing.T) {
	root := t.TempDir()
	dir := Dir(root)
	keep := filepath.Join(root, "keep")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, pod, claim, want string
	}{
		{"pod with a path", "../keep", claimX, "pod UID"},
		{"claim with a path", podA, "../../keep", "claim UID"},
		{"upper case", strings.ToUpper("abcdef01-1111-4111-8111-111111111111"), claimX, "pod UID"},
		{"empty claim", podA, "", "claim UID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for name, err := range map[string]error{
				"Mark":   Mark(dir, tc.pod, tc.claim),
				"Unmark": Unmark(dir, tc.pod, tc.claim),
			} {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v, want an error naming the %s", name, err, tc.want)
				}
			}
			if _, err := Marked(dir, tc.pod, tc.claim); err == nil {
				t.Error("Marked accepted it")
			}
		})
	}
	if err := UnmarkClaim(dir, "../keep"); err == nil {
		t.Error("UnmarkClaim accepted a path")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("a file outside the marks directory went: %v", err)
	}
}
