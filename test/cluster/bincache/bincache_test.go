package bincache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWithoutReplace(t *testing.T) {
	in := `module go.etcd.io/etcd/server/v3

go 1.26

require (
	go.etcd.io/etcd/api/v3 v3.7.0
)

replace (
	go.etcd.io/etcd/api/v3 => ../api
	go.etcd.io/etcd/pkg/v3 => ../pkg
)

replace example.com/x => ../x

require example.com/y v1.0.0
`
	p := filepath.Join(t.TempDir(), "go.mod")
	if err := os.WriteFile(p, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := withoutReplace(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"module ", "replace", "=>"} {
		if strings.Contains(out, bad) {
			t.Errorf("output still has %q:\n%s", bad, out)
		}
	}
	for _, good := range []string{"go 1.26", "go.etcd.io/etcd/api/v3 v3.7.0", "require example.com/y v1.0.0"} {
		if !strings.Contains(out, good) {
			t.Errorf("output lost %q:\n%s", good, out)
		}
	}
}

func TestKubeLDFlags(t *testing.T) {
	tests := []struct {
		version string
		want    []string
		wantErr bool
	}{
		{"v1.37.1", []string{
			"-X k8s.io/component-base/version.gitVersion=v1.37.1",
			"-X k8s.io/client-go/pkg/version.gitVersion=v1.37.1",
			"-X k8s.io/component-base/version.gitMajor=1",
			"-X k8s.io/component-base/version.gitMinor=37",
			"-X k8s.io/client-go/pkg/version.gitTreeState=clean",
		}, false},
		{"v0.0.0-20260101000000-abcdef", nil, false},
		{"devel", nil, true},
	}
	for _, tc := range tests {
		got, err := kubeLDFlags(tc.version)
		if (err != nil) != tc.wantErr {
			t.Fatalf("kubeLDFlags(%q) err = %v", tc.version, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("kubeLDFlags(%q) lacks %q: %s", tc.version, w, got)
			}
		}
	}
}

func TestUpToDate(t *testing.T) {
	dir := t.TempDir()
	comp := Component{Name: "x", Version: "v1", Binaries: []string{"bin"}, Dir: dir}
	c := &Cache{}
	if c.upToDate(comp) {
		t.Fatal("empty dir counted as up to date")
	}
	if err := os.WriteFile(filepath.Join(dir, "bin"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeStamp(comp, 0); err != nil {
		t.Fatal(err)
	}
	if !c.upToDate(comp) {
		t.Fatal("built component not up to date")
	}
	comp.Version = "v2"
	if c.upToDate(comp) {
		t.Fatal("component with another version counted as up to date")
	}
}

func TestModuleVersion(t *testing.T) {
	dir := t.TempDir()
	gomod := "module x\n\nrequire k8s.io/kubernetes v1.37.1\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.7.0 // indirect\n)\n\nreplace k8s.io/api => k8s.io/api v0.37.1\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Cache{TestModule: dir}
	for mod, want := range map[string]string{"k8s.io/kubernetes": "v1.37.1", "go.etcd.io/etcd/server/v3": "v3.7.0", "k8s.io/api": ""} {
		got, err := c.moduleVersion(t.Context(), mod)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("moduleVersion(%s) = %q, %v; want %q", mod, got, err, want)
		}
	}
}

func TestKubernetesBuildGoMod(t *testing.T) {
	kube := `module k8s.io/kubernetes

go 1.24.0

godebug default=go1.24

require (
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go // the client
	example.com/pinned => example.com/pinned v1.2.3
)

replace k8s.io/kubectl => ./staging/src/k8s.io/kubectl
`
	got, err := kubernetesBuildGoMod(kube, "v1.34.4")
	if err != nil {
		t.Fatal(err)
	}
	want := `module localcluster.invalid/kubebuild

go 1.24.0

godebug default=go1.24

require k8s.io/kubernetes v1.34.4

replace (
	k8s.io/api => k8s.io/api v0.34.4
	k8s.io/client-go => k8s.io/client-go v0.34.4
	example.com/pinned => example.com/pinned v1.2.3
	k8s.io/kubectl => k8s.io/kubectl v0.34.4
)
`
	if got != want {
		t.Errorf("go.mod:\n%s\nwant:\n%s", got, want)
	}

	for name, tc := range map[string]struct{ gomod, version, wantErr string }{
		"no replaces":   {"module k8s.io/kubernetes\n\ngo 1.24.0\n", "v1.34.4", "replaces no staging module"},
		"no go line":    {"module k8s.io/kubernetes\nreplace k8s.io/api => ./staging/src/k8s.io/api\n", "v1.34.4", "no go line"},
		"bad replace":   {"go 1.24\nreplace (\n\tk8s.io/api ./x\n)\n", "v1.34.4", "has no =>"},
		"not a release": {kube, "v1.34.0-rc.1", "not v1.MINOR.PATCH"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := kubernetesBuildGoMod(tc.gomod, tc.version)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestKubeMinor(t *testing.T) {
	for _, tc := range []struct {
		in           string
		minor, patch int
		ok           bool
	}{
		{"v1.34.4", 34, 4, true},
		{"v1.37.1", 37, 1, true},
		{"1.34.4", 0, 0, false},
		{"v1.34", 0, 0, false},
		{"v2.0.0", 0, 0, false},
		{"v1.34.4-beta.0", 0, 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			minor, patch, err := KubeMinor(tc.in)
			if (err == nil) != tc.ok || minor != tc.minor || patch != tc.patch {
				t.Errorf("KubeMinor(%q) = %d, %d, %v; want %d, %d, ok %t", tc.in, minor, patch, err, tc.minor, tc.patch, tc.ok)
			}
		})
	}
}
