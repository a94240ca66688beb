package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docBlock returns the code block that follows the marker <!-- seed example: name --> in
// doc.
func docBlock(t *testing.T, doc, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- seed example: "+name+" -->\n```")
	if !ok {
		t.Fatalf("docs/migration.md lacks the marked block %q", name)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("docs/migration.md: block %q is not closed", name)
	}
	return block
}

// TestDocSeedExample runs the seed pod's example of docs/migration.md: its config.json
// through migrate, on the dgx-h100 mock node, and compares what the CLI prints and writes
// with the document's blocks.
func TestDocSeedExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/migration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	work := t.TempDir()
	config := filepath.Join(work, "config.json")
	if err := os.WriteFile(config, []byte(docBlock(t, doc, "config.json")), 0o644); err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(work, "values-migrated.yaml")
	stdout, stderr, code := runApp(t, "", "migrate", "--from-shared-dev-plugin", config, "--values-out", values)
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	if want := docBlock(t, doc, "pools.yaml"); stdout != want {
		t.Errorf("pools:\n%s\ndocs/migration.md shows:\n%s", stdout, want)
	}
	written, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	if want := docBlock(t, doc, "values-migrated.yaml"); string(written) != want {
		t.Errorf("values:\n%s\ndocs/migration.md shows:\n%s", written, want)
	}
	root := writeProfile(t, "dgx-h100", "Y")
	stdout, stderr, code = runApp(t, "", "migrate", "--from-shared-dev-plugin", config, "--dry-run-against-node", root)
	if code != 0 {
		t.Fatalf("dry run: exit status %d: %s", code, stderr)
	}
	if got, want := strings.ReplaceAll(stdout, root, "/tmp/dgx/sys"), docBlock(t, doc, "dry run"); got != want {
		t.Errorf("dry run:\n%s\ndocs/migration.md shows:\n%s", got, want)
	}
}
