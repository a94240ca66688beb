package cliflags

import (
	"slices"

	"github.com/go-logr/logr"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap/zapcore"
	logsapi "k8s.io/component-base/logs/api/v1"
	jsonlog "k8s.io/component-base/logs/json"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

// CLIInfoVerbosity is the verbosity from which an operator CLI writes informational
// log lines to stderr; below it only errors are logged, and commands print their own
// warnings ("warning: ..."), so that normal output is not mixed with klog lines.
const CLIInfoVerbosity = 2

// NewCLI returns an operator CLI with commands, following the project's conventions:
// every flag's environment twin starts with envPrefix; -v and --log-format work
// before and after the command; a mistyped flag or command is one line with a "did you
// mean" and exit status 2 (ExitCode); version and --version print the same; a
// completion command writes bash, zsh and fish completion; logs go to stderr, informational
// ones only from CLIInfoVerbosity on. Logging is set up per run without global state.
func NewCLI(name, usage, envPrefix string, commands []*cli.Command) *cli.App {
	l := NewLogging()
	app := &cli.App{
		Name:    name,
		Usage:   usage,
		Version: version.String(),
		// As in NewApp: -v is the verbosity, Run adds --version.
		HideVersion:          true,
		Flags:                l.cliFlags(),
		EnableBashCompletion: true,
		OnUsageError:         OnUsageError,
		Action:               CommandNotFound,
	}
	commands = append(commands, versionCommand(), completionCommand(name))
	for _, c := range commands {
		// The logging flags once more for the command, bound to a configuration of
		// their own: a command's defaults must not overwrite what was given before it.
		cl := NewLogging()
		c.Flags = append(c.Flags, cl.cliFlags()...)
		c.OnUsageError = OnUsageError
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			logger, err := l.cliLogger(ctx, cl)
			if err != nil {
				return err
			}
			ctx.Context = klog.NewContext(ctx.Context, logger)
			if before != nil {
				return before(ctx)
			}
			return nil
		}
	}
	app.Commands = commands
	PrefixEnv(envPrefix, app.Flags, app.Commands)
	return app
}

// cliFlags are the logging flags an operator CLI honours: -v, --logging-format and
// --vmodule. The others configure the process-wide klog of a daemon.
func (l *Logging) cliFlags() []cli.Flag {
	var out []cli.Flag
	for _, f := range l.Flags() {
		if slices.Contains(cliLoggingFlags, f.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}

var cliLoggingFlags = []string{"v", "logging-format", "vmodule"}

// cliLogger builds the logger of one run from the root's values and the command's
// (cmd), the command's winning where given.
func (l *Logging) cliLogger(c *cli.Context, cmd *Logging) (logr.Logger, error) {
	merged := *l
	cfg := *l.Config
	merged.Config = &cfg
	if c.IsSet("v") {
		merged.Verbosity = cmd.Verbosity
	}
	if c.IsSet("logging-format") {
		cfg.Format = cmd.Config.Format
	}
	if c.IsSet("vmodule") {
		cfg.VModule = cmd.Config.VModule
	}
	if cfg.Format != "text" && cfg.Format != "json" {
		return logr.Logger{}, Usagef("--logging-format must be text or json, got %q", cfg.Format)
	}
	if err := merged.Validate(); err != nil {
		return logr.Logger{}, err
	}
	v := merged.Verbosity
	var logger logr.Logger
	switch cfg.Format {
	case "text":
		tc := textlogger.NewConfig(textlogger.Verbosity(v), textlogger.Output(c.App.ErrWriter))
		if err := tc.VModule().Set(logsapi.VModuleConfigurationPflag(&cfg.VModule).String()); err != nil {
			return logr.Logger{}, Usagef("--vmodule: %v", err)
		}
		logger = textlogger.NewLogger(tc)
	default:
		w := zapcore.AddSync(c.App.ErrWriter)
		logger, _ = jsonlog.NewJSONLogger(logsapi.VerbosityLevel(v), w, w, nil)
	}
	if v < CLIInfoVerbosity {
		logger = logr.New(errorsOnly{logger.GetSink()})
	}
	return logger, nil
}

// errorsOnly drops informational lines.
type errorsOnly struct{ logr.LogSink }

func (errorsOnly) Enabled(int) bool { return false }

func (s errorsOnly) WithValues(kv ...any) logr.LogSink {
	return errorsOnly{s.LogSink.WithValues(kv...)}
}

func (s errorsOnly) WithName(name string) logr.LogSink { return errorsOnly{s.LogSink.WithName(name)} }
