package doctable

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that records failures instead of stopping the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic(r) }
func (r *recorder) Fatal(...any)          { r.failed = true; panic(r) }
func check(r *recorder, path, want string, update bool) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	Check(r, path, "<!-- begin -->", "<!-- end -->", want, "the table", update)
}

func TestCheck(t *testing.T) {
	const doc = "intro\n<!-- begin -->\n| a |\n<!-- end -->\nrest\n"
	tests := []struct {
		name, doc, want string
		update          bool
		wantFail        bool
		wantDoc         string
	}{
		{"same", doc, "| a |\n", false, false, doc},
		{"differs", doc, "| b |\n", false, true, doc},
		{"differs, update", doc, "| b |\n", true, false, "intro\n<!-- begin -->\n| b |\n<!-- end -->\nrest\n"},
		{"no begin", "intro\n| a |\n<!-- end -->\n", "| a |\n", false, true, "intro\n| a |\n<!-- end -->\n"},
		{"no end", "<!-- begin -->\n| a |\n", "| a |\n", true, true, "<!-- begin -->\n| a |\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "doc.md")
			if err := os.WriteFile(path, []byte(tt.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			r := &recorder{TB: t}
			check(r, path, tt.want, tt.update)
			if r.failed != tt.wantFail {
				t.Errorf("failed %t, want %t", r.failed, tt.wantFail)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.wantDoc {
				t.Errorf("document %q, want %q", got, tt.wantDoc)
			}
		})
	}
}
