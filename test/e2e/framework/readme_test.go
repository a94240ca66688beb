package framework

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestReadmeBlock(t *testing.T) {
	const readme = "# Title\n\n<!-- e2e:install (run by the suite) -->\n```console\n$ kubectl create namespace x\n$ helm install x chart --namespace x\n```\n\n" +
		"<!-- e2e:install-more -->\n```console\n$ kubectl get pods\n```\n"
	tests := []struct {
		name, readme, block string
		want                []string
		wantErr             string
	}{
		{name: "commands in order", readme: readme, block: "install",
			want: []string{"kubectl create namespace x", "helm install x chart --namespace x"}},
		{name: "a name that prefixes another", readme: readme, block: "install-more", want: []string{"kubectl get pods"}},
		{name: "missing", readme: readme, block: "uninstall", wantErr: `the README has no block "uninstall"`},
		{name: "marked twice", readme: readme + "<!-- e2e:install -->\n```console\n$ true\n```\n", block: "install",
			wantErr: "marked twice (lines 3 and 13)"},
		{name: "no console block", readme: "<!-- e2e:a -->\n\n```console\n$ true\n```\n", block: "a",
			wantErr: "line 2: the block \"a\" marked on line 1 must start with ```console"},
		{name: "output line", readme: "<!-- e2e:a -->\n```console\n$ true\nsome output\n```\n", block: "a",
			wantErr: `line 4: the block "a" holds "some output", not a "$ " command`},
		{name: "empty command", readme: "<!-- e2e:a -->\n```console\n$ \n```\n", block: "a", wantErr: `holds "$ "`},
		{name: "unclosed", readme: "<!-- e2e:a -->\n```console\n$ true\n", block: "a", wantErr: "not a closed ```console block"},
		{name: "no commands", readme: "<!-- e2e:a -->\n```console\n```\n", block: "a", wantErr: "has no commands"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadmeBlock([]byte(tc.readme), tc.block)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLocalize(t *testing.T) {
	values := []string{"/c/driver-values.yaml", "/r/it's.yaml"}
	tests := []struct{ in, want string }{
		{"helm install r chart --namespace n", `helm install r chart --namespace n --values '/c/driver-values.yaml' --values '/r/it'\''s.yaml'`},
		{"helm upgrade r chart", `helm upgrade r chart --values '/c/driver-values.yaml' --values '/r/it'\''s.yaml'`},
		{"helm uninstall r --namespace n", "helm uninstall r --namespace n"},
		{"kubectl apply --server-side -f deployments/static/rdma-dra-driver.yaml", "kubectl apply --server-side -f /tmp/s/rdma-dra-driver.yaml"},
		{"kubectl create namespace n", "kubectl create namespace n"},
		{"helm install r oci://ghcr.io/rdma-dra/charts/rdma-dra-driver --version 0.1.0 --namespace n",
			`helm install r deployments/helm/rdma-dra-driver --namespace n --values '/c/driver-values.yaml' --values '/r/it'\''s.yaml'`},
		{"helm upgrade r oci://ghcr.io/rdma-dra/charts/rdma-dra-driver --namespace n --version=0.2.0",
			`helm upgrade r deployments/helm/rdma-dra-driver --namespace n --values '/c/driver-values.yaml' --values '/r/it'\''s.yaml'`},
		// Another chart keeps its version: only the published chart is replaced.
		{"helm install r oci://example.com/charts/other --version 1.0.0",
			`helm install r oci://example.com/charts/other --version 1.0.0 --values '/c/driver-values.yaml' --values '/r/it'\''s.yaml'`},
		{"helm install r oci://ghcr.io/rdma-dra/charts/rdma-dra-driver-extra --version 1.0.0",
			`helm install r oci://ghcr.io/rdma-dra/charts/rdma-dra-driver-extra --version 1.0.0 --values '/c/driver-values.yaml' --values '/r/it'\''s.yaml'`},
		{"helm pull oci://ghcr.io/rdma-dra/charts/rdma-dra-driver --version 0.1.0", "helm pull oci://ghcr.io/rdma-dra/charts/rdma-dra-driver --version 0.1.0"},
	}
	for _, tc := range tests {
		if got := Localize(tc.in, values, "/tmp/s/"); got != tc.want {
			t.Errorf("Localize(%q) =\n %s\nwant\n %s", tc.in, got, tc.want)
		}
	}
}

// TestRepositoryReadme reads the repository's own README as TestReadmeInstall does, so that
// an edit that breaks a marked block, or a helm install that Localize would not point at
// the repository's chart, fails make test instead of the end-to-end run.
func TestRepositoryReadme(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	installs := 0
	for _, name := range []string{"install-helm", "uninstall-helm", "install-static", "uninstall-static"} {
		cmds, err := ReadmeBlock(readme, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			local := Localize(c, nil, "/static")
			if strings.HasPrefix(c, "helm install ") {
				installs++
				if !strings.Contains(local, " "+RepoChart+" ") || strings.Contains(local, "--version") {
					t.Errorf("%s: %q becomes %q, not an install of %s", name, c, local, RepoChart)
				}
			}
			if strings.Contains(local, "deployments/static/") {
				t.Errorf("%s: %q still reads deployments/static/ after Localize: %q", name, c, local)
			}
		}
	}
	if installs != 1 {
		t.Errorf("the README's blocks hold %d helm install commands, want 1", installs)
	}
}
