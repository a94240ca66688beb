package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMessages runs the CLI as main does and checks the exact text an operator reads
// and the exit status: 0 success, 1 failure, 2 usage error.
func TestMessages(t *testing.T) {
	root := writeProfile(t, "mixed-bond", "Y")
	parent := filepath.Dir(root)
	work := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sriovFile := write("sriov.json", `{"resourceList":[{"resourceName":"vfs","isRdma":true,"selectors":{"vendors":["15b3"]}}]}`)
	zz := write("zz.json", `{"configList":[{"resourceName":"hca","rdmaHcaMax":100,"selectors":{"vendors":["zz"]}}]}`)
	good := write("good.json", `{"configList":[{"resourceName":"hca","rdmaHcaMax":100,"selectors":{"vendors":["15b3"]}}]}`)
	nodeOut := filepath.Join(work, "node-config.yaml")
	onlyIB := write("only-ib.yaml", "include:\n- linkTypes: [InfiniBand]\n")
	nothing := write("nothing.yaml", "include:\n- ibdevs: [none*]\n")
	nonEmpty := t.TempDir()
	write("../"+filepath.Base(nonEmpty)+"/keep", "x")

	tests := []struct {
		name       string
		args       []string
		stdin      string
		env        map[string]string
		code       int
		stderr     string // exact, unless stderrHas is set
		stderrHas  []string
		stdoutHas  []string
		stdoutNone bool
	}{
		{name: "positional path", args: []string{"discover", parent}, code: 2,
			stderr: `rdma-dra: discover takes no arguments, got "` + parent + `"; did you mean --sysfs-root ` + parent + "?\n"},
		{name: "positional word", args: []string{"slices", "node-a"}, code: 2,
			stderr: `rdma-dra: slices takes no arguments, got "node-a"` + "\n"},
		{name: "flag typo", args: []string{"discover", "--sysfs-rot", root}, code: 2,
			stderr: "rdma-dra: unknown flag --sysfs-rot; did you mean --sysfs-root? (rdma-dra discover --help lists the flags)\n"},
		{name: "flag typo in migrate", args: []string{"migrate", "--from-shared-dev-plugn", good}, code: 2,
			stderr: "rdma-dra: unknown flag --from-shared-dev-plugn; did you mean --from-shared-dev-plugin? (rdma-dra migrate --help lists the flags)\n"},
		{name: "global flag typo", args: []string{"--verison"}, code: 2,
			stderr: "rdma-dra: unknown flag --verison; did you mean --version? (rdma-dra --help lists the flags)\n"},
		{name: "command typo", args: []string{"discovr"}, code: 2,
			stderr: `rdma-dra: unknown command "discovr"; did you mean discover? (rdma-dra --help lists the commands)` + "\n"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2,
			stderr: `rdma-dra: unknown command "frobnicate" (rdma-dra --help lists the commands)` + "\n"},
		{name: "unknown output", args: []string{"discover", "--sysfs-root", root, "-o", "xml"}, code: 2,
			stderr: `rdma-dra: unknown output format "xml": want table, json or yaml` + "\n"},
		{name: "gids with json", args: []string{"discover", "--sysfs-root", root, "--gids", "-o", "json"}, code: 2,
			stderr: "rdma-dra: --gids prints a table; it does not combine with -o json\n"},
		{name: "missing root", args: []string{"discover", "--sysfs-root", filepath.Join(root, "nope")}, code: 1,
			stderrHas: []string{"rdma-dra: discover RDMA ports: open sysfs root"}},
		{name: "mock parent", args: []string{"discover", "--sysfs-root", parent}, code: 0,
			stderr:    "warning: no RDMA devices below " + parent + ", but " + root + " has some: did you mean --sysfs-root " + root + "?\n",
			stdoutHas: []string{"no RDMA devices found"}},
		{name: "not a sysfs tree", args: []string{"discover", "--sysfs-root", work}, code: 0,
			stderr: "warning: " + work + " does not look like a sysfs tree (it has no class/ directory)\n"},
		{name: "-v after the command", args: []string{"discover", "--sysfs-root", root, "-v", "1"}, code: 0, stderr: "",
			stdoutHas: []string{"mlx5_0/1"}},
		{name: "-v before the command", args: []string{"-v", "1", "discover", "--sysfs-root", root}, code: 0, stderr: ""},
		{name: "negative -v", args: []string{"discover", "-v", "-1"}, code: 2, stderr: "rdma-dra: -v must be 0 or more, got -1\n"},
		{name: "config leaves ports out", args: []string{"discover", "--sysfs-root", root, "--config", onlyIB}, code: 0,
			stderr: "warning: node config " + onlyIB + " leaves out 2 of 6 ports, which are not published: mlx5_4/1, mlx5_5/1\n"},
		{name: "config selects nothing", args: []string{"slices", "--node", "n", "--sysfs-root", root, "--config", nothing}, code: 0,
			stderr: "warning: node config " + nothing + " selects none of the 6 ports: the node would publish an empty slice\n"},
		{name: "slices without node", args: []string{"slices", "--sysfs-root", root}, code: 2, stderr: "rdma-dra: --node is required\n"},
		{name: "inventory and root", args: []string{"slices", "--node", "n", "--sysfs-root", root, "--inventory", "-"}, code: 2,
			stderr: "rdma-dra: --inventory and --sysfs-root exclude each other\n"},
		{name: "unversioned inventory", args: []string{"slices", "--node", "n", "--inventory", "-"}, stdin: `{"ports":[]}`, code: 2,
			stderr: `rdma-dra: -: decode inventory: no version; want "rdma.dra.io/inventory/v1" as written by rdma-dra discover -o json` + "\n"},
		{name: "mock-node into a used directory", args: []string{"mock-node", "--profile", "soft-roce", "--out", nonEmpty}, code: 1,
			stderr: "rdma-dra: " + nonEmpty + " is not empty: pass --force to replace its mock node (other files there are kept)\n"},
		{name: "mock-node without flags", args: []string{"mock-node"}, code: 2,
			stderr: "rdma-dra: --profile and --out are required (--list shows the profiles)\n"},
		{name: "migrate widening", args: []string{"migrate", "--from-shared-dev-plugin", zz, "--node-config-out", nodeOut}, code: 3, stdoutNone: true,
			stderrHas: []string{
				`error: configList[0] (hca): selectors.vendors: "zz" is not a PCI vendor ID of four hex digits; the plugin matched no device by it, so this entry selected nothing, while a pool without this selector selects every port (to accept, pass --allow-widening hca:vendors)` + "\n",
				"rdma-dra: 1 problem above, each a widening that --allow-widening or --allow-wider accepts by name; nothing written\n"}},
		{name: "migrate widening accepted", args: []string{"migrate", "--from-shared-dev-plugin", zz, "--allow-widening", "hca:vendors", "--node-config-out", nodeOut}, code: 0,
			stderrHas: []string{"note: WIDENED configList[0] (hca): selectors.vendors:"}, stdoutHas: []string{"name: hca\n"}},
		{name: "migrate accepting a typo", args: []string{"migrate", "--from-shared-dev-plugin", zz, "--allow-widening", "hca:vendor"}, code: 2,
			stderr: "rdma-dra: --allow-widening hca:vendor names no widening of this input; did you mean hca:vendors?\n"},
		{name: "migrate the wrong kind", args: []string{"migrate", "--from-shared-dev-plugin", sriovFile}, code: 2,
			stderr: "rdma-dra: " + sriovFile + ": config file has resourceList, not configList: this looks like an sriov-network-device-plugin config; use --from-sriov-device-plugin\n"},
		{name: "migrate not an object", args: []string{"migrate", "--from-sriov-device-plugin", "-"}, stdin: "[1, 2]", code: 2,
			stderr: "rdma-dra: -: parse input: want a JSON or YAML object (the plugin's config.json, a ConfigMap or a NicClusterPolicy), got a list\n"},
		{name: "migrate a positional file", args: []string{"migrate", good}, code: 2,
			stderr: `rdma-dra: migrate takes no arguments, got "` + good + `"; did you mean --from-shared-dev-plugin ` + good + ` or --from-sriov-device-plugin ` + good + "?\n"},
		{name: "migrate both inputs", args: []string{"migrate", "--from-shared-dev-plugin", good, "--from-sriov-device-plugin", sriovFile}, code: 2,
			stderr: "rdma-dra: give exactly one of --from-shared-dev-plugin and --from-sriov-device-plugin\n"},
		{name: "migrate missing file", args: []string{"migrate", "--from-shared-dev-plugin", filepath.Join(work, "none.json")}, code: 1,
			stderr: "rdma-dra: read " + filepath.Join(work, "none.json") + ": open " + filepath.Join(work, "none.json") + ": no such file or directory\n"},
		{name: "migrate prefix for the shared plugin", args: []string{"migrate", "--from-shared-dev-plugin", good, "--resource-prefix", "example.com", "--node-config-out", nodeOut}, code: 0,
			stderrHas: []string{"note: unit kept"}, stdoutHas: []string{"extendedResourceName: example.com/hca\n"}},
		{name: "migrate prefix from env", args: []string{"migrate", "--from-sriov-device-plugin", sriovFile}, env: map[string]string{"RDMA_DRA_RESOURCE_PREFIX": "nvidia.com", "RESOURCE_PREFIX": "wrong.example"}, code: 0,
			stderrHas: []string{"note: unit kept"}, stdoutHas: []string{"extendedResourceName: nvidia.com/vfs\n"}},
		{name: "env twins are prefixed", args: []string{"discover"}, env: map[string]string{"RDMA_DRA_SYSFS_ROOT": root, "RDMA_DRA_OUTPUT": "json", "OUTPUT": "out.txt"}, code: 0,
			stdoutHas: []string{`"version": "rdma.dra.io/inventory/v1"`}},
		{name: "version", args: []string{"version"}, code: 0, stdoutHas: []string{"rdma-dra "}},
		{name: "help command", args: []string{"help", "discover"}, code: 0, stdoutHas: []string{"rdma-dra discover - list the RDMA ports"}},
		{name: "no command", args: []string{}, code: 0, stdoutHas: []string{"COMMANDS:", "migrate"}},
		{name: "completion bash", args: []string{"completion", "bash"}, code: 0, stdoutHas: []string{"complete -o default -F _rdma_dra_complete rdma-dra\n"}},
		{name: "completion zsh", args: []string{"completion", "zsh"}, code: 0, stdoutHas: []string{"bashcompinit", "_rdma_dra_complete"}},
		{name: "completion fish", args: []string{"completion", "fish"}, code: 0, stdoutHas: []string{"complete -c rdma-dra", "discover"}},
		{name: "completion tcsh", args: []string{"completion", "tcsh"}, code: 2, stderr: "rdma-dra: unknown shell \"tcsh\": want bash, zsh or fish\n"},
		{name: "shares help default", args: []string{"slices", "--help"}, code: 0, stdoutHas: []string{"(default: the file's, else 16)", "$RDMA_DRA_PORT_SHARES"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			stdout, stderr, code := runApp(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d\nstdout %s\nstderr %s", code, tt.code, stdout, stderr)
			}
			if tt.stderrHas == nil && stderr != tt.stderr {
				t.Errorf("stderr:\n%q\nwant:\n%q", stderr, tt.stderr)
			}
			for _, s := range tt.stderrHas {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			for _, s := range tt.stdoutHas {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			if tt.stdoutNone && stdout != "" {
				t.Errorf("stdout should be empty:\n%s", stdout)
			}
		})
	}
}

func TestVersionFlagEqualsCommand(t *testing.T) {
	a, _, ca := runApp(t, "", "version")
	b, _, cb := runApp(t, "", "--version")
	if a != b || ca != 0 || cb != 0 || !strings.HasPrefix(a, "rdma-dra ") {
		t.Errorf("version %q (%d), --version %q (%d)", a, ca, b, cb)
	}
}

// TestLogsOnlyFromVerbosity2: a fact that cannot be read is logged, but only from -v 2;
// at the default verbosity stderr stays empty.
func TestLogsOnlyFromVerbosity2(t *testing.T) {
	root := writeProfile(t, "soft-roce", "Y")
	if err := os.Remove(filepath.Join(root, "class/infiniband/rxe0/ports/1/rate")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runApp(t, "", "discover", "--sysfs-root", root)
	if code != 0 || stderr != "" {
		t.Errorf("default verbosity: status %d, stderr %q", code, stderr)
	}
	_, stderr, code = runApp(t, "", "discover", "--sysfs-root", root, "-v", "2")
	if code != 0 || !strings.Contains(stderr, "Leaving fact unknown") {
		t.Errorf("-v 2: status %d, stderr %q", code, stderr)
	}
}

func TestNaturalOrder(t *testing.T) {
	root := writeProfile(t, "sriov", "Y")
	out, _, code := runApp(t, "", "discover", "--sysfs-root", root)
	if code != 0 {
		t.Fatal(code)
	}
	i2, i10 := strings.Index(out, "\nmlx5_2/1 "), strings.Index(out, "\nmlx5_10/1 ")
	if i2 < 0 || i10 < 0 || i2 > i10 {
		t.Errorf("mlx5_2 at %d, mlx5_10 at %d:\n%s", i2, i10, out)
	}
	for _, tt := range []struct {
		a, b string
		want int
	}{{"mlx5_2", "mlx5_10", -1}, {"mlx5_10", "mlx5_2", 1}, {"mlx5_bond_0", "mlx5_2", 1}, {"a01", "a1", -1}, {"a1", "a1", 0}, {"ib", "ib0", -1}} {
		if got := naturalCompare(tt.a, tt.b); got != tt.want {
			t.Errorf("naturalCompare(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestDocsListEveryFlag: docs/cli.md names every flag with its environment twin.
func TestDocsListEveryFlag(t *testing.T) {
	data, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	app := newApp()
	check := func(cmd string, f interface {
		Names() []string
		GetEnvVars() []string
	}) {
		for _, e := range f.GetEnvVars() {
			if !strings.HasPrefix(e, envPrefix) {
				t.Errorf("%s --%s: env %s lacks the %s prefix", cmd, f.Names()[0], e, envPrefix)
			}
			name := "`-" + f.Names()[0] + "`"
			if len(f.Names()[0]) > 1 {
				name = "`--" + f.Names()[0] + "`"
			}
			if !strings.Contains(doc, name) || !strings.Contains(doc, "`"+e+"`") {
				t.Errorf("docs/cli.md lacks %s %s with %s", cmd, name, e)
			}
		}
		if len(f.GetEnvVars()) == 0 {
			t.Errorf("%s --%s has no environment twin", cmd, f.Names()[0])
		}
	}
	for _, f := range app.Flags {
		if d, ok := f.(interface {
			Names() []string
			GetEnvVars() []string
		}); ok && f.Names()[0] != "help" && f.Names()[0] != "version" && f.Names()[0] != "generate-bash-completion" {
			check("all", d)
		}
	}
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			if d, ok := f.(interface {
				Names() []string
				GetEnvVars() []string
			}); ok {
				check(c.Name, d)
			}
		}
	}
}
