package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"
)

// The CHANGELOG follows Keep a Changelog: a section per release, `## [X.Y.Z] - YYYY-MM-DD`,
// under `## [Unreleased]`, with link definitions such as `[0.1.0]: https://...` at the end.
var (
	sectionHeading = regexp.MustCompile(`^## \[([^\]]+)\](?:\s+-\s+(.*?))?\s*$`)
	linkDefinition = regexp.MustCompile(`^\[[^\]]+\]:\s+\S+`)
)

// changelogSection returns the body of version's section in file: the lines between its
// heading and the next second-level heading, without the surrounding blank lines and the
// link definitions that end the file.
func changelogSection(file, version string) (string, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s does not exist: the release of %s needs a section \"## [%s] - YYYY-MM-DD\" in it", file, version, version)
	}
	if err != nil {
		return "", fmt.Errorf("read the changelog: %w", err)
	}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	start := -1
	for i, line := range lines {
		m := sectionHeading.FindStringSubmatch(line)
		if m == nil || m[1] != version {
			continue
		}
		if start >= 0 {
			return "", fmt.Errorf("%s:%d: a second section for %s", file, i+1, version)
		}
		if date := m[2]; date != "" {
			if _, err := time.Parse(time.DateOnly, date); err != nil {
				return "", fmt.Errorf("%s:%d: the section of %s is dated %q, want YYYY-MM-DD", file, i+1, version, date)
			}
		}
		start = i + 1
	}
	if start < 0 {
		return "", fmt.Errorf("%s has no section for %s: add \"## [%s] - YYYY-MM-DD\" with the release's changes", file, version, version)
	}
	end := len(lines)
	for i := start; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			end = i
			break
		}
	}
	body := lines[start:end]
	for len(body) > 0 {
		last := strings.TrimSpace(body[len(body)-1])
		if last != "" && !linkDefinition.MatchString(last) {
			break
		}
		body = body[:len(body)-1]
	}
	for len(body) > 0 && strings.TrimSpace(body[0]) == "" {
		body = body[1:]
	}
	if len(body) == 0 {
		return "", fmt.Errorf("%s: the section of %s is empty", file, version)
	}
	return strings.Join(body, "\n") + "\n", nil
}
