package doclinks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLinks(t *testing.T) {
	const md = "# Title\n" +
		"See [the CLI](cli.md#doctor) and ![a figure](img/a.svg \"title\").\n" +
		"Two on a line: [a](a.md), [b](<b c.md>), and [web](https://example.com).\n" +
		"`[not a link](x.md)` in a code span.\n" +
		"```console\n$ echo [not a link](y.md)\n```\n" +
		"~~~~\n[nor this](z.md)\n```\n~~~~\n" +
		"[ref]: ref.md \"a title\"\n" +
		"[^note]: a footnote, [but this](note.md) is a link.\n"
	got := Links([]byte(md))
	want := []Link{
		{2, "cli.md#doctor"}, {2, "img/a.svg"},
		{3, "a.md"}, {3, "b c.md"}, {3, "https://example.com"},
		{12, "ref.md"},
		{13, "note.md"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Links =\n %v\nwant\n %v", got, want)
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Device model", "device-model"},
		{"The `discover` table", "the-discover-table"},
		{"5. Replacing the Network Operator's `rdmaSharedDevicePlugin`", "5-replacing-the-network-operators-rdmashareddeviceplugin"},
		{"Mock netdevs: what is real and what is a stand-in", "mock-netdevs-what-is-real-and-what-is-a-stand-in"},
		{"`gidIndex` (default `auto`)", "gidindex-default-auto"},
		{"Timings (2 shared cores, measured on the development VM)", "timings-2-shared-cores-measured-on-the-development-vm"},
		{"Prepare: `prepare_p99_ms`, `prepare_p99_ms_8dev`", "prepare-prepare_p99_ms-prepare_p99_ms_8dev"},
		{"A [linked](x.md) heading ##", "a-linked-heading"},
		{"What fits in 24 GiB", "what-fits-in-24-gib"},
	}
	for _, tc := range tests {
		if got := Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	const md = "# Title\n## Flags\n### Flags\n#### Flags\n#NotAHeading\n    # indented code\n" +
		"```yaml\n# a comment\n```\n<a name=\"custom\"></a>\n"
	got := Anchors([]byte(md))
	want := map[string]bool{"title": true, "flags": true, "flags-1": true, "flags-2": true, "custom": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Anchors = %v, want %v", got, want)
	}
}

func TestCheck(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/cli.md", "# CLI\n## Doctor\n")
	write("docs/schema.json", "{}\n")
	write("README.md", "# Top\n## Install\n"+
		"[ok](docs/cli.md) [ok](docs/cli.md#doctor) [ok](#install) [ok](docs/) [ok](docs/schema.json#x)\n"+
		"[web](https://example.com/missing.md)\n"+
		"[missing](docs/gone.md)\n"+
		"[bad anchor](docs/cli.md#flags)\n"+
		"[bad self anchor](#usage)\n"+
		"[outside](../elsewhere/DESIGN.md)\n")
	var got []string
	for _, err := range Check(root, filepath.Join(root, "README.md")) {
		got = append(got, strings.TrimPrefix(err.Error(), root+"/"))
	}
	want := []string{
		"README.md:5: docs/gone.md: no such file or directory",
		"README.md:6: docs/cli.md#flags: docs/cli.md has no heading #flags",
		"README.md:7: #usage: the document has no heading #usage",
		"README.md:8: ../elsewhere/DESIGN.md points outside the repository",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Check =\n %q\nwant\n %q", got, want)
	}
}
