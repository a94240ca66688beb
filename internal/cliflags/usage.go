package cliflags

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
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
// when there is one, instead of the whole help.
func OnUsageError(c *cli.Context, err error, _ bool) error {
	where := c.App.Name
	var flags []cli.Flag
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		where += " " + c.Command.Name
		flags = c.Command.Flags
	} else {
		flags = c.App.Flags
	}
	m := undefinedFlag.FindStringSubmatch(err.Error())
	if m == nil {
		return Usagef("%s (%s --help lists the flags)", err, where)
	}
	msg := fmt.Sprintf("unknown flag %s", dashed(m[1]))
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	if s := Nearest(m[1], names); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", dashed(s))
	}
	return Usagef("%s (%s --help lists the flags)", msg, where)
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// Nearest returns the candidate closest to s by edit distance, if it is close enough to
// be a typo, or one that starts with s.
func Nearest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := distance(s, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	// A third of the longer name, at least one edit from three letters on: a single
	// letter is no typo of another.
	limit := max(len(s), len(best)) / 3
	if limit < 1 && len(s) >= 3 {
		limit = 1
	}
	if best != "" && bestD <= limit {
		return best
	}
	for _, c := range candidates {
		if len(s) >= 2 && strings.HasPrefix(c, s) {
			return c
		}
	}
	return ""
}

// distance is the Levenshtein distance with adjacent transpositions counted as one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// CommandNotFound is the root Action of an app with commands: no command shows the help,
// an unknown one is a usage error with the nearest command.
func CommandNotFound(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowAppHelp(c)
	}
	name := c.Args().First()
	var names []string
	for _, cmd := range c.App.Commands {
		if !cmd.Hidden {
			names = append(names, cmd.Names()...)
		}
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
