// Package driverimage assembles the driver's container image without a container engine:
// it builds the static binaries with the Go toolchain and writes an OCI archive with the
// file layout of the Containerfile's final stage. The layout is read from the table in the
// Containerfile's header, so the Containerfile stays the one place that defines it.
package driverimage

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
)

// Binary is one row of the layout table that comes from a Go main package.
type Binary struct {
	// Path inside the image, e.g. /usr/bin/rdma-dra-kubeletplugin.
	Path string
	Mode fs.FileMode
	// Owner is "uid:gid".
	Owner string
	// Package is the main package relative to the repository, e.g. cmd/rdma-dra.
	Package string
	// Optional binaries are skipped when their package is not in the tree.
	Optional bool
}

// BaseFile is a file the Containerfile takes from its base image.
type BaseFile struct {
	Path string
	// Mode is set when the table gives one (e.g. /tmp (1777)); 0 otherwise.
	Mode fs.FileMode
}

// Layout is the final stage as the Containerfile's header documents it.
type Layout struct {
	Binaries []Binary
	Base     []BaseFile
	// Entrypoint is nil for "Entrypoint none".
	Entrypoint []string
	Cmd        []string
	WorkingDir string
	User       string
}

var (
	binaryRow = regexp.MustCompile(`^#\s+(/\S+)\s+(0[0-7]{3})\s+(\d+:\d+)\s+(cmd/[^\s,]+)(.*)$`)
	baseRow   = regexp.MustCompile(`^#\s+(/etc/\S.*)$`)
	baseMode  = regexp.MustCompile(`^(\S+)\s+\(([0-7]{3,4})\)$`)
	cmdRe     = regexp.MustCompile(`Cmd (\[[^\]]*\])`)
	entryRe   = regexp.MustCompile(`Entrypoint (none|\[[^\]]*\])`)
	workdirRe = regexp.MustCompile(`WorkingDir "([^"]*)"`)
	userRe    = regexp.MustCompile(`User "([^"]*)"`)
)

// ParseContainerfile reads the layout table and the config line from the Containerfile's
// header comment (the block from "# Final-stage layout" to the first non-comment line).
func ParseContainerfile(text string) (Layout, error) {
	var l Layout
	var config strings.Builder
	inLayout, inConfig := false, false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "#") {
			if inLayout {
				break
			}
			continue
		}
		if strings.HasPrefix(line, "# Final-stage layout") {
			inLayout = true
			continue
		}
		if !inLayout {
			continue
		}
		if strings.HasPrefix(line, "# Config:") {
			inConfig = true
		}
		if inConfig {
			if strings.TrimSpace(strings.TrimPrefix(line, "#")) == "" {
				inConfig = false
			} else {
				config.WriteString(strings.TrimPrefix(line, "#"))
			}
			continue
		}
		if m := binaryRow.FindStringSubmatch(line); m != nil {
			mode, _ := strconv.ParseUint(m[2], 8, 32)
			l.Binaries = append(l.Binaries, Binary{
				Path: m[1], Mode: fs.FileMode(mode), Owner: m[3], Package: m[4],
				Optional: strings.Contains(m[5], "only if present"),
			})
			continue
		}
		if m := baseRow.FindStringSubmatch(line); m != nil {
			for _, item := range strings.Split(m[1], ",") {
				item = strings.TrimSpace(item)
				f := BaseFile{Path: item}
				if mm := baseMode.FindStringSubmatch(item); mm != nil {
					mode, _ := strconv.ParseUint(mm[2], 8, 32)
					f = BaseFile{Path: mm[1], Mode: fs.FileMode(mode)}
				}
				l.Base = append(l.Base, f)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Layout{}, fmt.Errorf("read Containerfile: %w", err)
	}
	if err := l.parseConfig(config.String()); err != nil {
		return Layout{}, err
	}
	if len(l.Binaries) == 0 {
		return Layout{}, fmt.Errorf("no binary rows found in the Containerfile's \"# Final-stage layout\" table")
	}
	if len(l.Base) == 0 {
		return Layout{}, fmt.Errorf("no base-image row (/etc/...) found in the Containerfile's layout table")
	}
	return l, nil
}

// parseConfig reads `Entrypoint none, Cmd [...], WorkingDir "/", User "0:0"`.
func (l *Layout) parseConfig(s string) error {
	m := cmdRe.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("no Cmd [...] in the Containerfile's \"# Config:\" line: %q", s)
	}
	if err := json.Unmarshal([]byte(m[1]), &l.Cmd); err != nil {
		return fmt.Errorf("parse Cmd %s: %w", m[1], err)
	}
	if m := entryRe.FindStringSubmatch(s); m != nil && m[1] != "none" {
		if err := json.Unmarshal([]byte(m[1]), &l.Entrypoint); err != nil {
			return fmt.Errorf("parse Entrypoint %s: %w", m[1], err)
		}
	}
	if m := workdirRe.FindStringSubmatch(s); m != nil {
		l.WorkingDir = m[1]
	}
	if m := userRe.FindStringSubmatch(s); m != nil {
		l.User = m[1]
	}
	return nil
}
