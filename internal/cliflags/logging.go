// Package cliflags holds the flags every binary of the project shares, each with its
// environment twin, and turns them into configuration.
package cliflags

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // registers the "json" log format
	"k8s.io/klog/v2"
)

// LoggingCategory groups the logging flags in --help.
const LoggingCategory = "Logging:"

// Logging is the logging configuration of a binary: component-base's
// LoggingConfiguration and its feature gates, the same options every Kubernetes
// component has (--logging-format, --vmodule, --feature-gates ...), on the command line
// of urfave/cli with environment twins.
type Logging struct {
	// Verbosity is -v. It is an int of its own, not the configuration's unsigned
	// VerbosityLevel, so that a negative value is refused with a clear message.
	Verbosity int
	// Config is what the flags other than -v fill in.
	Config *logsapi.LoggingConfiguration
	// FeatureGate holds the logging feature gates (ContextualLogging,
	// LoggingAlphaOptions, LoggingBetaOptions) of --feature-gates.
	FeatureGate featuregate.MutableVersionedFeatureGate
}

// NewLogging returns the default logging configuration: text, verbosity 0.
func NewLogging() *Logging {
	gate := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(gate); err != nil {
		// Only a feature registered twice fails, which a fresh gate cannot have.
		panic(fmt.Sprintf("add logging feature gates: %v", err))
	}
	return &Logging{Config: logsapi.NewLoggingConfiguration(), FeatureGate: gate}
}

// loggingFlag says how one flag of component-base is spelled here: the names and
// variables of earlier releases stay as aliases.
type loggingFlag struct {
	aliases []string
	env     []string
	usage   string
}

// loggingFlags are the flags whose spelling differs from the rule (envName); they come
// first in --help, in this order. The chart sets LOG_VERBOSITY and LOG_FORMAT.
var loggingFlags = map[string]loggingFlag{
	"logging-format": {aliases: []string{"log-format"}, env: []string{"LOG_FORMAT", "LOGGING_FORMAT"}, usage: "log format: text or json"},
	"vmodule":        {env: []string{"LOG_VMODULE"}},
	"feature-gates":  {env: []string{"FEATURE_GATES"}},
}

var loggingOrder = []string{"v", "logging-format", "vmodule", "feature-gates"}

// envName is the environment twin of a component-base flag that loggingFlags does not
// name: the flag in upper case, LOG_ in front where it does not start so already
// (--log-flush-frequency: LOG_FLUSH_FREQUENCY).
func envName(flagName string) string {
	env := strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
	if !strings.HasPrefix(env, "LOG") {
		env = "LOG_" + env
	}
	return env
}

// Flags returns the logging flags bound to l: -v and every flag component-base's
// logsapi.AddGoFlags defines, plus --feature-gates.
func (l *Logging) Flags() []cli.Flag {
	flags := []cli.Flag{&cli.IntFlag{
		Name:        "v",
		Category:    LoggingCategory,
		Usage:       "log verbosity: 0 shows what an operator needs, 4 and up is for debugging",
		Destination: &l.Verbosity,
		EnvVars:     []string{"LOG_VERBOSITY"},
	}}
	fs := flag.NewFlagSet("logging", flag.ContinueOnError)
	logsapi.AddGoFlags(l.Config, fs)
	var bridged []*cli.GenericFlag
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "v" {
			return // the IntFlag above
		}
		bridged = append(bridged, l.bridge(f.Name, f.Usage, f.Value))
	})
	bridged = append(bridged, l.bridge("feature-gates",
		"comma-separated key=value pairs that turn logging features on or off: "+strings.Join(l.FeatureGate.KnownFeatures(), "; "),
		gateValue{l.FeatureGate}))
	slices.SortStableFunc(bridged, func(a, b *cli.GenericFlag) int {
		return rank(a.Name) - rank(b.Name)
	})
	for _, f := range bridged {
		flags = append(flags, f)
	}
	return flags
}

// gateValue is a feature gate as a flag value: the gate parses key=value pairs itself.
type gateValue struct{ featuregate.MutableFeatureGate }

// String is the gate's own rendering where it has one (the implementation of
// featuregate.NewFeatureGate does).
func (g gateValue) String() string {
	if s, ok := g.MutableFeatureGate.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}

// rank orders the flags of loggingOrder first, the others after them as they come.
func rank(name string) int {
	if i := slices.Index(loggingOrder, name); i >= 0 {
		return i
	}
	return len(loggingOrder)
}

func (l *Logging) bridge(name, usage string, value cli.Generic) *cli.GenericFlag {
	f := &cli.GenericFlag{Name: name, Category: LoggingCategory, Usage: usage, Value: value, EnvVars: []string{envName(name)}}
	if spelled, ok := loggingFlags[name]; ok {
		f.Aliases = spelled.aliases
		if spelled.env != nil {
			// A copy: PrefixEnv rewrites a CLI's variables in place.
			f.EnvVars = slices.Clone(spelled.env)
		}
		if spelled.usage != "" {
			f.Usage = spelled.usage
		}
	}
	return f
}

// complete copies -v into the configuration and refuses what the flags cannot.
func (l *Logging) complete() error {
	if l.Verbosity < 0 {
		return Usagef("-v must be 0 or more, got %d", l.Verbosity)
	}
	l.Config.Verbosity = logsapi.VerbosityLevel(l.Verbosity)
	return nil
}

// Validate checks the configuration as component-base does (a known format, --vmodule
// only with text, alpha options only with their feature gate), without applying it.
func (l *Logging) Validate() error {
	if err := l.complete(); err != nil {
		return err
	}
	if errs := logsapi.Validate(l.Config, l.FeatureGate, nil); len(errs) > 0 {
		return Usagef("logging flags: %v", errs.ToAggregate())
	}
	return nil
}

// Apply configures klog from l and returns a context that carries the logger, so that
// everything below uses klog.FromContext. It changes process-wide state: once per
// process.
func (l *Logging) Apply(ctx context.Context) (context.Context, error) {
	if err := l.Validate(); err != nil {
		return ctx, err
	}
	if err := logsapi.ValidateAndApply(l.Config, l.FeatureGate); err != nil {
		return ctx, fmt.Errorf("apply logging flags: %w", err)
	}
	return klog.NewContext(ctx, klog.Background()), nil
}
