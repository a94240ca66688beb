package cliflags

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

// runArgs runs app as Main does, with args after its name.
func runArgs(app *cli.App, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	code = Run(context.Background(), app, append([]string{app.Name}, args...), &errOut)
	return out.String(), errOut.String(), code
}

// testCLI is an operator CLI with one command, discover, whose Action reports that it ran.
func testCLI(ran *bool) *cli.App {
	return NewCLI("my-cli", "test", "MY_CLI_", []*cli.Command{{
		Name: "discover",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "sysfs-root", EnvVars: []string{"SYSFS_ROOT"}},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, EnvVars: []string{"OUTPUT"}},
		},
		Action: func(c *cli.Context) error {
			*ran = true
			return NoArgs(c, nil)
		},
	}})
}

// testDaemon is a binary of NewApp whose Action reports that it ran. Its Before, which
// applies the logging flags to the process, runs only when --version is not given.
func testDaemon(ran *bool) *cli.App {
	app := NewApp("my-daemon", "test", []cli.Flag{&cli.StringFlag{Name: "node", EnvVars: []string{"NODE_NAME"}}})
	app.Action = func(*cli.Context) error {
		*ran = true
		return nil
	}
	return app
}

// TestVersion: --version and the version command print one line, "<name> <version>",
// for each of two apps built in one process, and -v stays the verbosity. urfave/cli's
// package-level version flag and printer are left as they are.
func TestVersion(t *testing.T) {
	flag := cli.VersionFlag
	printer := reflect.ValueOf(cli.VersionPrinter).Pointer()
	tests := []struct {
		name    string
		app     func(ran *bool) *cli.App
		args    []string
		stdout  string
		wantRan bool
	}{
		{name: "cli --version", app: testCLI, args: []string{"--version"}, stdout: "my-cli " + version.String() + "\n"},
		{name: "cli version", app: testCLI, args: []string{"version"}, stdout: "my-cli " + version.String() + "\n"},
		{name: "cli --version before a command", app: testCLI, args: []string{"--version", "discover"}, stdout: "my-cli " + version.String() + "\n"},
		{name: "cli -v is the verbosity", app: testCLI, args: []string{"-v", "3", "discover"}, wantRan: true},
		{name: "daemon --version", app: testDaemon, args: []string{"--version"}, stdout: "my-daemon " + version.String() + "\n"},
		{name: "daemon --version before any flag is applied", app: testDaemon, args: []string{"--version", "--logging-format", "xml"}, stdout: "my-daemon " + version.String() + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran bool
			stdout, stderr, code := runArgs(tt.app(&ran), tt.args...)
			if code != ExitOK || stderr != "" || stdout != tt.stdout || ran != tt.wantRan {
				t.Errorf("status %d, stdout %q, stderr %q, Action ran %v; want 0, %q, \"\", %v", code, stdout, stderr, ran, tt.stdout, tt.wantRan)
			}
		})
	}
	if cli.VersionFlag != flag || !slices.Equal(cli.VersionFlag.Names(), []string{"version", "v"}) {
		t.Errorf("cli.VersionFlag changed to %v", cli.VersionFlag.Names())
	}
	if reflect.ValueOf(cli.VersionPrinter).Pointer() != printer {
		t.Error("cli.VersionPrinter changed")
	}
}

// TestHelpShowsVersion: --help keeps urfave/cli's VERSION section and lists --version.
func TestHelpShowsVersion(t *testing.T) {
	for _, app := range []func(*bool) *cli.App{testCLI, testDaemon} {
		var ran bool
		stdout, _, code := runArgs(app(&ran), "--help")
		for _, s := range []string{"\nVERSION:\n   " + version.String() + "\n", "--version"} {
			if code != ExitOK || !strings.Contains(stdout, s) {
				t.Errorf("status %d, help lacks %q:\n%s", code, s, stdout)
			}
		}
	}
}

// TestVersionFlagOnce: --version is not among the flags a binary declares (each has an
// environment twin), and a second run of the app does not add it twice.
func TestVersionFlagOnce(t *testing.T) {
	var ran bool
	app := testDaemon(&ran)
	if slices.ContainsFunc(app.Flags, func(f cli.Flag) bool { return f.Names()[0] == "version" }) {
		t.Error("NewApp declares --version")
	}
	for range 2 {
		if stdout, _, code := runArgs(app, "--version"); code != ExitOK || !strings.HasPrefix(stdout, "my-daemon ") {
			t.Errorf("status %d, stdout %q", code, stdout)
		}
	}
	n := 0
	for _, f := range app.Flags {
		if f.Names()[0] == "version" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d --version flags after two runs, want 1", n)
	}
}

// TestUsageErrors: a mistyped flag or command is one line with the nearest name where
// the input looks like a typo of it, and exit status 2.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"discover", "--sysfs-rot", "/x"},
			"my-cli: unknown flag --sysfs-rot; did you mean --sysfs-root? (my-cli discover --help lists the flags)\n"},
		{[]string{"discover", "--ouptut", "json"},
			"my-cli: unknown flag --ouptut; did you mean --output? (my-cli discover --help lists the flags)\n"},
		{[]string{"discover", "--frobnicate"},
			"my-cli: unknown flag --frobnicate (my-cli discover --help lists the flags)\n"},
		{[]string{"discover", "-s"},
			"my-cli: unknown flag -s (my-cli discover --help lists the flags)\n"},
		{[]string{"discover", "-v", "many"},
			`my-cli: invalid value "many" for flag -v: parse error (my-cli discover --help lists the flags)` + "\n"},
		{[]string{"--verison"},
			"my-cli: unknown flag --verison; did you mean --version? (my-cli --help lists the flags)\n"},
		{[]string{"--hlep"},
			"my-cli: unknown flag --hlep; did you mean --help? (my-cli --help lists the flags)\n"},
		{[]string{"discovr"},
			`my-cli: unknown command "discovr"; did you mean discover? (my-cli --help lists the commands)` + "\n"},
		{[]string{"frobnicate"},
			`my-cli: unknown command "frobnicate" (my-cli --help lists the commands)` + "\n"},
		{[]string{"discover", "extra"},
			`my-cli: discover takes no arguments, got "extra"` + "\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var ran bool
			stdout, stderr, code := runArgs(testCLI(&ran), tt.args...)
			if code != ExitUsage || stderr != tt.stderr || stdout != "" {
				t.Errorf("status %d, stdout %q, stderr:\n%q\nwant status 2, stderr:\n%q", code, stdout, stderr, tt.stderr)
			}
		})
	}
}

// TestCompletion: each shell's script, and fish's also after the help command has run in
// the process, which makes urfave/cli's shared help command its own subcommand.
func TestCompletion(t *testing.T) {
	var ran bool
	if _, _, code := runArgs(testCLI(&ran), "help", "discover"); code != ExitOK {
		t.Fatalf("help discover: status %d", code)
	}
	tests := []struct {
		shell string
		has   []string
	}{
		{"bash", []string{"_my_cli_complete() {", "--generate-bash-completion", "complete -o default -F _my_cli_complete my-cli\n"}},
		{"zsh", []string{"autoload -U +X bashcompinit && bashcompinit\n", "complete -o default -F _my_cli_complete my-cli\n"}},
		{"fish", []string{"complete -c my-cli", "-a 'discover'", "-l sysfs-root", "-l version"}},
	}
	for _, tt := range tests {
		t.Run(tt.shell, func(t *testing.T) {
			stdout, stderr, code := runArgs(testCLI(&ran), "completion", tt.shell)
			if code != ExitOK || stderr != "" {
				t.Fatalf("status %d, stderr %q", code, stderr)
			}
			for _, s := range tt.has {
				if !strings.Contains(stdout, s) {
					t.Errorf("the script lacks %q:\n%s", s, stdout)
				}
			}
		})
	}
	_, stderr, code := runArgs(testCLI(&ran), "completion", "tcsh")
	if want := "my-cli: unknown shell \"tcsh\": want bash, zsh or fish\n"; code != ExitUsage || stderr != want {
		t.Errorf("tcsh: status %d, stderr %q; want 2, %q", code, stderr, want)
	}
}
