// Package doctable keeps a generated part of a Markdown document, between two marker
// lines, the same as the code that renders it: tests call Check, and with update set it
// rewrites that part instead of failing.
package doctable

import (
	"os"
	"strings"
	"testing"
)

// Check compares the lines of the document at path between the lines begin and end with
// want. When they differ it rewrites them if update is set and fails the test otherwise,
// naming what the part is (e.g. "the flag table").
func Check(t testing.TB, path, begin, end, want, what string, update bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(data), begin+"\n")
	if !ok {
		t.Fatalf("%s lacks the line %q", path, begin)
	}
	have, after, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("%s lacks the line %q", path, end)
	}
	if have == want {
		return
	}
	if update {
		if err := os.WriteFile(path, []byte(before+begin+"\n"+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s of %s differs from the code; run the test with -update.\nwant:\n%s\nhave:\n%s", what, path, want, have)
}
