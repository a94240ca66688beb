package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseMemlock(t *testing.T) {
	const head = "Limit                     Soft Limit           Hard Limit           Units     \n"
	tests := []struct {
		name       string
		limits     string
		soft, hard string
		err        string
	}{
		{"numbers", head + "Max locked memory         8388608              8388608              bytes     \n", "8 MiB", "8 MiB", ""},
		{"unlimited", head + "Max locked memory         unlimited            unlimited            bytes     \n", "unlimited", "unlimited", ""},
		{"mixed", head + "Max locked memory         65536                unlimited            bytes\n", "64 KiB", "unlimited", ""},
		{"odd size", "Max locked memory 1000 1500 bytes\n", "1000 B", "1500 B", ""},
		{"no line", head + "Max open files 1024 4096 files\n", "", "", "no \"Max locked memory\" line"},
		{"garbage", "Max locked memory         lots                 unlimited            bytes\n", "", "", "neither a number nor unlimited"},
		{"short", "Max locked memory 5\n", "", "", "want soft and hard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			soft, hard, err := parseMemlock(tt.limits)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if soft.String() != tt.soft || hard.String() != tt.hard {
				t.Errorf("soft %s hard %s, want %s %s", soft, hard, tt.soft, tt.hard)
			}
		})
	}
}

func TestParseUlimit(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{{"-1", "unlimited", true}, {"67108864", "64 MiB", true}, {"-2", "", false}, {"1G", "", false}} {
		got, err := parseUlimit(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got.String() != tt.want) {
			t.Errorf("parseUlimit(%q) = %v, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestFlagValue(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"containerd"}, ""},
		{[]string{"containerd", "--config", "/a.toml"}, "/a.toml"},
		{[]string{"containerd", "--config=/b.toml"}, "/b.toml"},
		{[]string{"containerd", "-c", "/c.toml"}, "/c.toml"},
		{[]string{"crio", "--config-dir", "/d"}, ""},
		{[]string{"containerd", "--log-level", "debug", "-c=/e.toml"}, "/e.toml"},
		{[]string{"containerd", "--config"}, ""},
	} {
		if got := flagValue(tt.args, "config", "c"); got != tt.want {
			t.Errorf("flagValue(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestParseSemver(t *testing.T) {
	for _, tt := range []struct {
		in           string
		major, minor int
		ok           bool
	}{{"v2.4.2", 2, 4, true}, {"v1.30.0-rc.1", 1, 30, true}, {"v1.7", 1, 7, true}, {"(devel)", 0, 0, false}, {"2.1.0", 0, 0, false}, {"v0.0.0-2024", 0, 0, false}} {
		major, minor, ok := parseSemver(tt.in)
		if major != tt.major || minor != tt.minor || ok != tt.ok {
			t.Errorf("parseSemver(%q) = %d, %d, %v", tt.in, major, minor, ok)
		}
	}
}

func TestMissingDirs(t *testing.T) {
	got := missingDirs([]string{"/var/run/cdi", "/etc/cdi/", "/opt/cdi"}, []string{"/run/cdi", "/etc/cdi"})
	if !slices.Equal(got, []string{"/opt/cdi"}) {
		t.Errorf("missing %v, want [/opt/cdi]", got)
	}
}

// TestLoadContainerd covers the config versions, imports and a missing file.
func TestLoadContainerd(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, content string
		version       int
		exists        bool
		cdi           any
		nriDisable    any
		err           string
	}{
		{name: "no version is version 1", content: "[plugins.cri]\nenable_cdi = true\n", version: 1, exists: true, cdi: true},
		{name: "version 2", content: "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = false\n", version: 2, exists: true, cdi: false},
		{name: "version 2 ignores the v3 table", content: "version = 2\n[plugins.\"io.containerd.cri.v1.runtime\"]\nenable_cdi = true\n", version: 2, exists: true},
		{name: "version 3", content: "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = true\n[plugins.'io.containerd.nri.v1.nri']\ndisable = true\n",
			version: 3, exists: true, cdi: true, nriDisable: true},
		{name: "bad version", content: "version = 7\n", err: "want 1, 2 or 3"},
		{name: "bad imports", content: "version = 3\nimports = \"x\"\n", err: "want a list of paths"},
		{name: "import replaces a table whole", content: "version = 3\nimports = [\"more/*.toml\"]\n[plugins.'io.containerd.nri.v1.nri']\ndisable = true\nsocket_path = \"/x\"\n",
			version: 3, exists: true, nriDisable: false},
	}
	write("more/1.toml", "version = 3\n[plugins.'io.containerd.nri.v1.nri']\ndisable = false\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadContainerd(write("config.toml", tt.content))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.version != tt.version || c.exists != tt.exists {
				t.Errorf("version %d exists %v, want %d %v", c.version, c.exists, tt.version, tt.exists)
			}
			if got, ok := c.cri["enable_cdi"]; tt.cdi == nil && ok || tt.cdi != nil && got != tt.cdi {
				t.Errorf("enable_cdi %v (set %v), want %v", got, ok, tt.cdi)
			}
			if got, ok := c.nri["disable"]; tt.nriDisable == nil && ok || tt.nriDisable != nil && got != tt.nriDisable {
				t.Errorf("nri disable %v (set %v), want %v", got, ok, tt.nriDisable)
			}
			if _, ok := c.nri["socket_path"]; ok && tt.name == "import replaces a table whole" {
				t.Errorf("socket_path of the main file survived the import's table")
			}
		})
	}
	c, err := loadContainerd(filepath.Join(dir, "none.toml"))
	if err != nil || c.exists {
		t.Errorf("missing file: %+v, %v", c, err)
	}
}

func TestWriteText(t *testing.T) {
	results := []Result{
		{Check: "a", Status: OK, Found: "fine"},
		{Check: "longer-name", Status: Fail, Found: "broken", Fix: "Repair it."},
		{Check: "list", Status: OK, Found: "2 items", Details: []string{"one", "two"}},
		{Check: "b", Status: Skip, Found: "not here"},
	}
	var b bytes.Buffer
	if err := WriteText(&b, results); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"OK    a            fine\n" +
		"FAIL  longer-name  broken\n" +
		"                   fix: Repair it.\n" +
		"OK    list         2 items\n" +
		"                   one\n" +
		"                   two\n" +
		"SKIP  b            not here\n" +
		"\n" +
		"4 checks: 2 OK, 0 WARN, 1 FAIL, 1 SKIP\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestDocumentFields pins the document's field names: scripts read them.
func TestDocumentFields(t *testing.T) {
	b, err := MarshalDocument([]Result{{Check: "x", Status: Warn, Found: "f > g", Fix: "h"}, {Check: "y", Status: OK, Found: "z"}})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["version"] != DocumentVersion {
		t.Errorf("version %v", doc["version"])
	}
	checks, _ := doc["checks"].([]any)
	if len(checks) != 2 {
		t.Fatalf("checks %v", doc["checks"])
	}
	first, _ := checks[0].(map[string]any)
	var keys []string
	for k := range first {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"check", "fix", "found", "status"}) {
		t.Errorf("keys %v", keys)
	}
	if second, _ := checks[1].(map[string]any); second["fix"] != nil {
		t.Errorf("an OK result has a fix key: %v", second)
	}
	if !strings.Contains(string(b), `"f > g"`) {
		t.Errorf("HTML-escaped: %s", b)
	}
}

func TestWorst(t *testing.T) {
	for _, tt := range []struct {
		in   []Status
		want Status
	}{{nil, OK}, {[]Status{OK, Skip}, OK}, {[]Status{Warn, OK}, Warn}, {[]Status{Warn, Fail, OK}, Fail}} {
		if got := Worst(tt.in...); got != tt.want {
			t.Errorf("Worst(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzParseMemlock: any limits file gives limits or an error, never a panic, and what it
// parses prints back as a number or unlimited.
func FuzzParseMemlock(f *testing.F) {
	f.Add("Max locked memory         8388608              8388608              bytes\n")
	f.Add("Max locked memory unlimited unlimited bytes\n")
	f.Add("Max locked memory\n")
	f.Fuzz(func(t *testing.T, s string) {
		soft, hard, err := parseMemlock(s)
		if err != nil {
			return
		}
		for _, l := range []rlimit{soft, hard} {
			if l.String() == "" {
				t.Errorf("empty rendering of %+v", l)
			}
		}
	})
}

// FuzzDecodeContainerd: any file gives a config or an error, never a panic; a config has
// a version from 1 to 3.
func FuzzDecodeContainerd(f *testing.F) {
	f.Add([]byte("version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = true\ncdi_spec_dirs = ['/etc/cdi']\n"))
	f.Add([]byte("[plugins.cri]\nenable_cdi = 1\n"))
	f.Add([]byte("version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, version, err := decodeContainerd(data)
		if err != nil {
			return
		}
		if version < 1 || version > 3 {
			t.Errorf("version %d", version)
		}
		plugins, _ := doc["plugins"].(map[string]any)
		t1 := criTable(plugins, version)
		boolKey(t1, "enable_cdi")
		stringsKey(t1, "cdi_spec_dirs")
		if _, err := resolveImports("/etc/containerd/config.toml", doc["imports"]); err != nil && !errors.Is(err, filepath.ErrBadPattern) && !strings.Contains(err.Error(), "want") {
			t.Errorf("imports: %v", err)
		}
	})
}
