package cliflags

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// completionCommand prints a completion script for the app called name. Candidates come
// from urfave/cli itself: EnableBashCompletion answers --generate-bash-completion with
// the commands or flags that fit, and App.ToFishCompletion writes fish's script. What
// urfave/cli v2 lacks is the bash and zsh scripts inside the binary (they are files of
// its module, autocomplete/, for packagers to install), so bashCompletion is the
// script's few lines.
func completionCommand(name string) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: fmt.Sprintf("bash: source <(%[1]s completion bash)\n"+
			"zsh:  source <(%[1]s completion zsh)\n"+
			"fish: %[1]s completion fish > ~/.config/fish/completions/%[1]s.fish", name),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return Usagef("completion takes one argument, the shell: bash, zsh or fish")
			}
			w := c.App.Writer
			switch shell := c.Args().First(); shell {
			case "bash":
				_, err := io.WriteString(w, bashCompletion(name))
				return err
			case "zsh":
				_, err := io.WriteString(w, "autoload -U +X bashcompinit && bashcompinit\n"+bashCompletion(name))
				return err
			case "fish":
				// urfave/cli v2 shares one help command among all apps, and the help
				// command becomes its own subcommand once it has run in the process
				// ("help COMMAND"); the fish writer then recurses without end. Write
				// the script for copies of the commands without help.
				a := *c.App
				a.Commands = withoutHelp(c.App.Commands)
				s, err := a.ToFishCompletion()
				if err != nil {
					return fmt.Errorf("write fish completion: %w", err)
				}
				_, err = io.WriteString(w, s)
				return err
			default:
				return Usagef("unknown shell %q: want bash, zsh or fish", shell)
			}
		},
	}
}

// withoutHelp copies commands, leaving out the help command at every level.
func withoutHelp(cmds []*cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		cp := *c
		cp.Subcommands = withoutHelp(c.Subcommands)
		out = append(out, &cp)
	}
	return out
}

// bashCompletion asks the binary itself for candidates (urfave's
// --generate-bash-completion), so the script never goes stale.
func bashCompletion(name string) string {
	fn := "_" + safeIdent(name) + "_complete"
	return fmt.Sprintf(`%[1]s() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o default -F %[1]s %[2]s
`, fn, name)
}

// safeIdent makes name a shell function name: letters and digits, '_' for the rest.
func safeIdent(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}
