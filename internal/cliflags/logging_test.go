package cliflags

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// TestLoggingFlags runs the logging flags through the parser and component-base's
// validation, from the command line and from their environment twins, the names of
// earlier releases included.
func TestLoggingFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(*Logging) bool
		wantErr string
	}{
		{name: "defaults", check: func(l *Logging) bool {
			return l.Config.Verbosity == 0 && l.Config.Format == "text" && len(l.Config.VModule) == 0
		}},
		{name: "-v", args: []string{"-v", "3"}, check: func(l *Logging) bool { return l.Config.Verbosity == 3 }},
		{name: "--v=", args: []string{"--v=5"}, check: func(l *Logging) bool { return l.Config.Verbosity == 5 }},
		{name: "LOG_VERBOSITY", env: map[string]string{"LOG_VERBOSITY": "4"}, check: func(l *Logging) bool { return l.Config.Verbosity == 4 }},
		{name: "negative -v", args: []string{"-v", "-1"}, wantErr: "-v must be 0 or more, got -1"},
		{name: "--logging-format", args: []string{"--logging-format", "json"}, check: func(l *Logging) bool { return l.Config.Format == "json" }},
		{name: "--log-format, the earlier name", args: []string{"--log-format=json"}, check: func(l *Logging) bool { return l.Config.Format == "json" }},
		{name: "LOG_FORMAT", env: map[string]string{"LOG_FORMAT": "json"}, check: func(l *Logging) bool { return l.Config.Format == "json" }},
		{name: "LOGGING_FORMAT", env: map[string]string{"LOGGING_FORMAT": "json"}, check: func(l *Logging) bool { return l.Config.Format == "json" }},
		{name: "unknown format", args: []string{"--logging-format", "xml"}, wantErr: `Unsupported log format`},
		{name: "--vmodule", args: []string{"--vmodule", "publish=4,prepare*=6"}, check: func(l *Logging) bool {
			return len(l.Config.VModule) == 2 && l.Config.VModule[0] == logsapi.VModuleItem{FilePattern: "publish", Verbosity: 4} &&
				l.Config.VModule[1] == logsapi.VModuleItem{FilePattern: "prepare*", Verbosity: 6}
		}},
		{name: "LOG_VMODULE", env: map[string]string{"LOG_VMODULE": "publish=4"}, check: func(l *Logging) bool { return len(l.Config.VModule) == 1 }},
		{name: "vmodule with json", args: []string{"--logging-format=json", "--vmodule=publish=4"}, wantErr: "Only supported for text log format"},
		{name: "bad vmodule", args: []string{"--vmodule=publish"}, wantErr: "publish"},
		{name: "alpha option without its gate", args: []string{"--log-text-split-stream"}, wantErr: "LoggingAlphaOptions is disabled"},
		{name: "alpha option with its gate", args: []string{"--feature-gates=LoggingAlphaOptions=true", "--log-text-split-stream"},
			check: func(l *Logging) bool { return l.Config.Options.Text.SplitStream }},
		{name: "gate and option from the environment", env: map[string]string{"FEATURE_GATES": "LoggingAlphaOptions=true", "LOG_TEXT_SPLIT_STREAM": "true"},
			check: func(l *Logging) bool { return l.Config.Options.Text.SplitStream }},
		{name: "contextual logging off", args: []string{"--feature-gates=ContextualLogging=false"},
			check: func(l *Logging) bool { return !l.FeatureGate.Enabled(logsapi.ContextualLogging) }},
		{name: "unknown gate", args: []string{"--feature-gates=Bogus=true"}, wantErr: "Bogus"},
		{name: "flush frequency", env: map[string]string{"LOG_FLUSH_FREQUENCY": "2s"}, check: func(l *Logging) bool {
			return l.Config.FlushFrequency.Duration.Duration.String() == "2s"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			l := NewLogging()
			app := &cli.App{Flags: l.Flags(), Action: func(*cli.Context) error { return l.Validate() }}
			err := app.Run(append([]string{"bin"}, tt.args...))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !tt.check(l) {
				t.Errorf("unexpected configuration %+v, gates %v", *l.Config, l.FeatureGate)
			}
		})
	}
}

// TestLoggingFlagNames: every flag of component-base is here, each with an environment
// twin and no name or variable twice.
func TestLoggingFlagNames(t *testing.T) {
	names := map[string]bool{}
	envs := map[string]bool{}
	for _, f := range NewLogging().Flags() {
		for _, n := range f.Names() {
			if names[n] {
				t.Errorf("flag name %s twice", n)
			}
			names[n] = true
		}
		ev := f.(interface{ GetEnvVars() []string }).GetEnvVars()
		if len(ev) == 0 {
			t.Errorf("flag %s has no environment twin", f.Names()[0])
		}
		for _, e := range ev {
			if envs[e] {
				t.Errorf("environment variable %s twice", e)
			}
			envs[e] = true
		}
	}
	for _, want := range []string{"v", "logging-format", "log-format", "vmodule", "feature-gates", "log-flush-frequency", "log-json-split-stream"} {
		if !names[want] {
			t.Errorf("no flag %s (have %v)", want, names)
		}
	}
}
