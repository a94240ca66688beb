package cliflags

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// versionFlagName is --version. urfave/cli v2 has a --version of its own, but only as the
// package variables VersionFlag (with the alias -v, which is klog's verbosity here) and
// VersionPrinter: changing them changes every app of the process. The apps of this
// project set HideVersion and get a flag of their own instead.
const versionFlagName = "version"

// errVersionPrinted ends a run in which --version was printed: Before has no other way
// to skip the Action and the commands. Run turns it into ExitOK.
var errVersionPrinted = errors.New("version printed")

// withVersionFlag gives app a --version that prints PrintVersion's line and does nothing
// else, before any other Before. It is added on the first run, as urfave/cli adds its
// --help, so that app.Flags lists only the flags with environment twins (the chart and
// the docs are checked against them); a second run finds it there.
func withVersionFlag(app *cli.App) {
	if slices.ContainsFunc(app.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), versionFlagName) }) {
		return
	}
	app.HideVersion = true
	if app.CustomAppHelpTemplate == "" {
		app.CustomAppHelpTemplate = appHelpTemplate
	}
	app.Flags = append(app.Flags, &cli.BoolFlag{Name: versionFlagName, Usage: "print the version", DisableDefaultText: true})
	before := app.Before
	app.Before = func(c *cli.Context) error {
		if c.Bool(versionFlagName) {
			PrintVersion(c)
			return errVersionPrinted
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
}

// appHelpTemplate is urfave/cli's help of an app, with the VERSION section that the
// library shows only along with its own --version (HideVersion hides both).
var appHelpTemplate = strings.Replace(cli.AppHelpTemplate, "{{if not .HideVersion}}", "{{if .Version}}", 1)

// PrintVersion prints "<name> <version>", the one form of --version and version.
func PrintVersion(c *cli.Context) {
	fmt.Fprintf(c.App.Writer, "%s %s\n", c.App.Name, c.App.Version)
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version of this build (the same as --version)",
		Action: func(c *cli.Context) error {
			if err := NoArgs(c, nil); err != nil {
				return err
			}
			PrintVersion(c)
			return nil
		},
	}
}
