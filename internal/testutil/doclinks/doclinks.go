// Package doclinks checks, in tests, the links of the repository's Markdown documents:
// each relative link must name a file or directory that exists, and a fragment into a
// Markdown document must name one of its headings, so that a moved or renamed page, or a
// retitled section, fails a test instead of leaving a reader at a dead end.
//
// Only what GitHub renders as a link counts: inline links and images ([text](target),
// ![alt](target)) and reference definitions ([name]: target), outside fenced code blocks
// and code spans. Absolute URLs (https:, mailto:, ...) are not followed.
package doclinks

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Link is one link of a document.
type Link struct {
	// Line is the 1-based line it is on.
	Line int
	// Target is the destination as written, fragment included: "docs/cli.md#doctor".
	Target string
}

var (
	// inlineLink matches [text](target) and ![alt](target); the target is in angle
	// brackets (<a b.md>) or ends at the first space (a title may follow) or closing
	// parenthesis.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(?:<([^>]*)>|([^)\s]+))(?:\s+"[^"]*")?\s*\)`)
	// refDefinition matches a reference definition line, [name]: target, and not a
	// footnote ([^name]: text).
	refDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]^][^\]]*\]:\s+<?(\S+?)>?(?:\s+.*)?$`)
	// codeSpan matches an inline code span, whose content is not Markdown.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// scheme starts an absolute URL.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// fence returns the fence marker a line opens or closes a fenced code block with
// ("```", "~~~~"), or "" when it is not a fence line.
func fence(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return ""
	}
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(t) && t[n] == c {
			n++
		}
		if n >= 3 {
			return t[:n]
		}
	}
	return ""
}

// lines calls fn with each line of md that is not inside a fenced code block.
func lines(md []byte, fn func(n int, line string)) {
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(nil, 1<<20)
	open := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if f := fence(line); f != "" {
			switch {
			case open == "":
				open = f
				continue
			case f[0] == open[0] && len(f) >= len(open) && strings.TrimSpace(line) == f:
				open = ""
				continue
			}
		}
		if open == "" {
			fn(n, line)
		}
	}
}

// Links returns the links of a Markdown document, in order.
func Links(md []byte) []Link {
	var out []Link
	lines(md, func(n int, line string) {
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Line: n, Target: m[1]})
			return
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			out = append(out, Link{Line: n, Target: m[1] + m[2]})
		}
	})
	return out
}

// Anchors returns the fragment IDs GitHub gives the headings of a Markdown document
// ("## The `discover` table" is #the-discover-table; a repeated heading gets -1, -2, ...),
// and the names of explicit HTML anchors (<a name="x">, id="x").
func Anchors(md []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines(md, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		t := strings.TrimLeft(line, " ")
		if len(line)-len(t) > 3 || !strings.HasPrefix(t, "#") {
			return
		}
		level := len(t) - len(strings.TrimLeft(t, "#"))
		text := t[level:]
		if level > 6 || (text != "" && text[0] != ' ' && text[0] != '\t') {
			return
		}
		id := Slug(text)
		if n := seen[id]; n > 0 {
			seen[id]++
			id = fmt.Sprintf("%s-%d", id, n)
		} else {
			seen[id] = 1
		}
		out[id] = true
	})
	return out
}

var (
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	closingHash = regexp.MustCompile(`\s+#+\s*$`)
)

// Slug is the fragment ID GitHub derives from a heading's text: the rendered text in
// lower case, without punctuation other than '-' and '_', spaces turned into '-'.
func Slug(heading string) string {
	s := strings.TrimSpace(closingHash.ReplaceAllString(heading, ""))
	s = headingLink.ReplaceAllString(s, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// IsLocal reports whether a link target points into the repository: not an absolute URL
// and not a bare fragment of the same document.
func IsLocal(target string) bool {
	return !scheme.MatchString(target) && !strings.HasPrefix(target, "//")
}

// Check resolves the local links of the Markdown document at path and returns one error
// per link whose file is missing, that leaves root, or whose fragment names no heading of
// the Markdown document it points to. A bare fragment (#section) is checked against the
// document itself.
func Check(root, path string) []error {
	md, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return []error{err}
	}
	var errs []error
	anchors := map[string]map[string]bool{}
	for _, l := range Links(md) {
		if !IsLocal(l.Target) {
			continue
		}
		file, frag, _ := strings.Cut(l.Target, "#")
		if i := strings.IndexByte(file, '?'); i >= 0 {
			file = file[:i]
		}
		dest := path
		if file != "" {
			dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
		}
		abs, err := filepath.Abs(dest)
		if err != nil {
			return append(errs, err)
		}
		if abs != absRoot && !strings.HasPrefix(abs, absRoot+string(filepath.Separator)) {
			errs = append(errs, fmt.Errorf("%s:%d: %s points outside the repository", path, l.Line, l.Target))
			continue
		}
		info, err := os.Stat(dest)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %s: no such file or directory", path, l.Line, l.Target))
			continue
		}
		if frag == "" || info.IsDir() || filepath.Ext(dest) != ".md" {
			continue
		}
		a, ok := anchors[dest]
		if !ok {
			data, err := os.ReadFile(dest)
			if err != nil {
				return append(errs, err)
			}
			a = Anchors(data)
			anchors[dest] = a
		}
		if !a[strings.ToLower(frag)] {
			doc := file
			if doc == "" {
				doc = "the document"
			}
			errs = append(errs, fmt.Errorf("%s:%d: %s: %s has no heading #%s", path, l.Line, l.Target, doc, frag))
		}
	}
	return errs
}
