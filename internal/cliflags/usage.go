package cliflags

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"
)

// Exit statuses of every binary of the project.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: the command could not do it (a file it cannot read, a node it cannot scan).
	ExitFailure = 1
	// ExitUsage: the command line or the input is wrong (an unknown flag, a positional
	// argument, a value out of range, a migration that would widen a selection).
	ExitUsage = 2
)

// UsageError is a mistake of the user, reported with ExitUsage.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// StatusError is an error with an exit status of its own, for a command that documents
// statuses beyond these (migrate's status for a migration that would only widen).
type StatusError struct {
	Status int
	Err    error
}

func (e *StatusError) Error() string { return e.Err.Error() }

func (e *StatusError) Unwrap() error { return e.Err }

// ExitCode is the exit status for err: ExitOK for nil, the status of a StatusError or
// ExitUsage for a UsageError anywhere in its chain, ExitFailure otherwise.
func ExitCode(err error) int {
	var ue *UsageError
	var se *StatusError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &se):
		return se.Status
	case errors.As(err, &ue):
		return ExitUsage
	}
	return ExitFailure
}

var undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)

// OnUsageError turns the flag parser's error into one line, with the nearest flag name
// when there is one, instead of the whole help. urfave/cli's App.Suggest does not do
// it: it prints "Incorrect Usage", the suggestion and the whole help to stdout. The
// suggestion is the library's (SuggestFlag), kept only when isTypo accepts it.
func OnUsageError(c *cli.Context, err error, _ bool) error {
	// The root's HelpName is the app's name, a command's "<app> <command>".
	where := c.Command.HelpName
	m := undefinedFlag.FindStringSubmatch(err.Error())
	if m == nil {
		return Usagef("%s (%s --help lists the flags)", err, where)
	}
	msg := fmt.Sprintf("unknown flag %s", dashed(m[1]))
	if cli.SuggestFlag != nil { // nil when built with the tag urfave_cli_no_suggest
		s := cli.SuggestFlag(c.Command.Flags, m[1], c.Command.HideHelp)
		if isTypo(m[1], strings.TrimLeft(s, "-")) {
			msg += fmt.Sprintf("; did you mean %s?", s)
		}
	}
	return Usagef("%s (%s --help lists the flags)", msg, where)
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// typoSimilarity is the least similarity of a typo and the name it misspells. urfave/cli
// v2 suggests the most similar name however little it resembles the input
// ("--frobnicate": "-o"); below this, nothing is suggested.
const typoSimilarity = 0.8

// similarity is urfave/cli's measure of how alike two names are: Jaro-Winkler with the
// constants of its SuggestFlag and SuggestCommand, 1 for the same name.
func similarity(a, b string) float64 {
	return smetrics.JaroWinkler(a, b, 0.7, 4)
}

// isTypo says whether s looks like a misspelt name. A single letter is no typo of
// anything: "-s" does not suggest "--sysfs-root".
func isTypo(s, name string) bool {
	return utf8.RuneCountInString(s) > 1 && name != "" && similarity(name, s) >= typoSimilarity
}

// Nearest returns the candidate most similar to s, the one urfave/cli would suggest, if
// s looks like a typo of it; else "".
func Nearest(s string, candidates []string) string {
	best, bestSim := "", 0.0
	for _, c := range candidates {
		if sim := similarity(c, s); sim > bestSim {
			best, bestSim = c, sim
		}
	}
	if !isTypo(s, best) {
		return ""
	}
	return best
}

// CommandNotFound is the root Action of an app with commands: no command shows the help,
// an unknown one is a usage error with the nearest command. urfave/cli v2 has no
// unknown-command error at all (the root's Action gets the name as an argument), and its
// SuggestCommand returns a sentence of its own ("Did you mean %q?") rather than the name.
func CommandNotFound(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowAppHelp(c)
	}
	name := c.Args().First()
	var names []string
	for _, cmd := range c.App.VisibleCommands() {
		names = append(names, cmd.Names()...)
	}
	msg := fmt.Sprintf("unknown command %q", name)
	if s := Nearest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", s)
	}
	return Usagef("%s (%s --help lists the commands)", msg, c.App.Name)
}

// NoArgs is a usage error when the command got positional arguments; hint, when not
// empty, is appended ("did you mean --sysfs-root DIR?").
func NoArgs(c *cli.Context, hint func(arg string) string) error {
	if !c.Args().Present() {
		return nil
	}
	args := c.Args().Slice()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	msg := fmt.Sprintf("%s takes no arguments, got %s", c.Command.Name, strings.Join(quoted, " "))
	if hint != nil {
		if h := hint(args[0]); h != "" {
			msg += "; " + h
		}
	}
	// Flags after an argument are not parsed: say so when that is what happened.
	if slices.ContainsFunc(args[1:], func(a string) bool { return strings.HasPrefix(a, "-") }) {
		msg += " (flags after an argument are read as arguments)"
	}
	return Usagef("%s", msg)
}

// PrefixEnv prefixes the environment variables of flags and of every command's flags
// with prefix, so that a CLI's twins (RDMA_DRA_OUTPUT) do not collide with variables
// people already have (OUTPUT).
func PrefixEnv(prefix string, flags []cli.Flag, commands []*cli.Command) {
	for _, f := range flags {
		prefixFlag(prefix, f)
	}
	for _, c := range commands {
		PrefixEnv(prefix, c.Flags, c.Subcommands)
	}
}

func prefixFlag(prefix string, f cli.Flag) {
	// Every flag type returns its own EnvVars slice, which is rewritten in place.
	ev, ok := f.(interface{ GetEnvVars() []string })
	if !ok {
		return
	}
	envs := ev.GetEnvVars()
	for i, e := range envs {
		if !strings.HasPrefix(e, prefix) {
			envs[i] = prefix + e
		}
	}
}
