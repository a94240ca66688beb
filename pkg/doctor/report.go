package doctor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// DocumentVersion is the version of the document doctor -o json writes; a change of a
// key's name or meaning needs a new version.
const DocumentVersion = "rdma.dra.io/doctor/v1"

// Document is the results as one versioned document.
type Document struct {
	// Version is DocumentVersion.
	Version string `json:"version"`
	// Checks are the results in the order Run returned them.
	Checks []Result `json:"checks"`
}

// MarshalDocument returns the results as an indented JSON document.
func MarshalDocument(results []Result) ([]byte, error) {
	if results == nil {
		results = []Result{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	// Fixes name shell redirections and TOML tables: keep > and " readable.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(Document{Version: DocumentVersion, Checks: results}); err != nil {
		return nil, fmt.Errorf("encode doctor document: %w", err)
	}
	return b.Bytes(), nil
}

// WriteText writes one line per result (status, check, what was found), the fix of a WARN
// or FAIL and any details indented below it, and a summary line.
func WriteText(w io.Writer, results []Result) error {
	width := 0
	for _, r := range results {
		width = max(width, len(r.Check))
	}
	indent := strings.Repeat(" ", 4+2+width+2)
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", r.Status, width, r.Check, r.Found)
		if r.Fix != "" {
			fmt.Fprintf(&b, "%sfix: %s\n", indent, r.Fix)
		}
		for _, d := range r.Details {
			fmt.Fprintf(&b, "%s%s\n", indent, d)
		}
	}
	fmt.Fprintf(&b, "\n%s\n", Summary(results))
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is one line with the number of results of each status.
func Summary(results []Result) string {
	n := Counts(results)
	return fmt.Sprintf("%d checks: %d OK, %d WARN, %d FAIL, %d SKIP", len(results), n[OK], n[Warn], n[Fail], n[Skip])
}

// Named returns the names of the results with status s, in order.
func Named(results []Result, s Status) []string {
	var out []string
	for _, r := range results {
		if r.Status == s {
			out = append(out, r.Check)
		}
	}
	return out
}
