package driverimage

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// The Containerfile's final stage, after its FROM, is written between these lines from
// Files, Config and Labels; TestContainerfile fails when it differs and -update rewrites it.
const (
	generatedBegin = "# BEGIN generated from test/cluster/driverimage (Files, Config, Labels): do not edit;"
	generatedHint  = "# rewrite with: cd test && go test ./cluster/driverimage -run TestContainerfile -update"
	generatedEnd   = "# END generated"
)

// Build arguments of the Containerfile: the version (image tag) and git commit stamped into
// the labels. TARGETARCH, which picks the binaries, is set by the engine per platform.
const (
	ArgVersion   = "VERSION"
	ArgGitCommit = "GIT_COMMIT"
)

// ContainerfileStage returns the final stage's instructions after FROM: the binaries of
// Files copied from the build context's StageDir, the labels, user, working directory and
// command.
func ContainerfileStage() string { return stage(Files, Config) }

// stage writes the final stage of files and cfg.
func stage(files []File, cfg RuntimeConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ARG TARGETARCH\nARG %s=v0.0.0-dev\nARG %s=unknown\n", ArgVersion, ArgGitCommit)
	for _, g := range copyGroups(files) {
		// One source per line when there are several, so that a diff shows each.
		sep := " "
		if len(g.files) > 1 {
			sep = " \\\n     "
		}
		fmt.Fprintf(&b, "COPY --chown=%d:%d --chmod=%04o", g.uid, g.gid, uint32(g.mode.Perm()))
		for _, f := range g.files {
			b.WriteString(sep + path.Join(StageDir("${TARGETARCH}"), f.Name()))
		}
		b.WriteString(sep + g.dest + "\n")
	}
	labels := Labels("${"+ArgVersion+"}", "${"+ArgGitCommit+"}")
	for i, k := range sortedKeys(labels) {
		if i == 0 {
			b.WriteString("LABEL ")
		} else {
			b.WriteString(" \\\n      ")
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteString("\n")
	if cfg.Entrypoint != nil {
		fmt.Fprintf(&b, "ENTRYPOINT %s\n", jsonArray(cfg.Entrypoint))
	}
	fmt.Fprintf(&b, "USER %s\nWORKDIR %s\nCMD %s\n", cfg.User, cfg.WorkingDir, jsonArray(cfg.Cmd))
	return b.String()
}

// copyGroup is one COPY instruction: files with the same owner and mode that go into one
// directory under their build-context names, or a single file copied to its own path.
type copyGroup struct {
	dest     string
	mode     fs.FileMode
	uid, gid int
	files    []File
}

// copyGroups groups files into COPY instructions, in their order.
func copyGroups(files []File) []copyGroup {
	var out []copyGroup
	for _, f := range files {
		dest := f.Path
		if path.Base(f.Path) == f.Name() {
			dest = path.Dir(f.Path) + "/"
		}
		if n := len(out); n > 0 && strings.HasSuffix(dest, "/") && out[n-1].dest == dest &&
			out[n-1].mode.Perm() == f.Mode.Perm() && out[n-1].uid == f.UID && out[n-1].gid == f.GID {
			out[n-1].files = append(out[n-1].files, f)
			continue
		}
		out = append(out, copyGroup{dest: dest, mode: f.Mode, uid: f.UID, gid: f.GID, files: []File{f}})
	}
	return out
}

func jsonArray(s []string) string {
	b, _ := json.Marshal(s)
	return strings.ReplaceAll(string(b), `","`, `", "`)
}

// RewriteContainerfile returns text with the block between the generated markers replaced
// by ContainerfileStage.
func RewriteContainerfile(text string) (string, error) {
	begin := strings.Index(text, generatedBegin)
	end := strings.Index(text, generatedEnd)
	if begin < 0 || end < begin {
		return "", fmt.Errorf("find the generated block: the Containerfile needs the lines %q ... %q after its final FROM", generatedBegin, generatedEnd)
	}
	return text[:begin] + generatedBegin + "\n" + generatedHint + "\n" + ContainerfileStage() + text[end:], nil
}
