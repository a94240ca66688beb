// Command runc-oomclamp stands in for runc on hosts that refuse to lower a process's
// oom_score_adj (the kubelet asks for -998 for sandboxes and -997 for guaranteed pods, and
// runc then fails with "can't get final child's PID from pipe"). Before it execs the real
// runc with the same arguments, it rewrites a negative process.oomScoreAdj to 0 in the OCI
// bundle's config.json (create, run) or in the process file (exec --process).
//
// The real runc is RUNC_OOMCLAMP_REAL when set, else /usr/sbin/runc. containerd's runc
// runtime is pointed at this binary (options.BinaryName) only when the host needs it.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	real := os.Getenv("RUNC_OOMCLAMP_REAL")
	if real == "" {
		real = "/usr/sbin/runc"
	}
	for _, f := range filesToClamp(os.Args[1:]) {
		if err := clamp(f); err != nil {
			fmt.Fprintf(os.Stderr, "runc-oomclamp: %v\n", err)
			os.Exit(1)
		}
	}
	argv := append([]string{real}, os.Args[1:]...)
	if err := syscall.Exec(real, argv, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "runc-oomclamp: exec %s: %v\n", real, err)
		os.Exit(1)
	}
}

// filesToClamp finds the JSON files that carry an oomScoreAdj in runc's arguments:
// <bundle>/config.json of create and run, and the --process file of exec.
func filesToClamp(args []string) []string {
	var out []string
	cmd, bundle := "", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		next := func() string {
			if hasVal {
				return val
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case name == "--bundle" || name == "-b":
			bundle = next()
		case name == "--process" || name == "-p":
			if cmd == "exec" {
				out = append(out, next())
			}
		case cmd == "" && !strings.HasPrefix(a, "-"):
			cmd = a
		case cmd == "" && (name == "--root" || name == "--log" || name == "--log-format" || name == "--criu" || name == "--rootless"):
			next()
		}
	}
	if cmd == "create" || cmd == "run" {
		if bundle == "" {
			bundle = "."
		}
		out = append(out, filepath.Join(bundle, "config.json"))
	}
	return out
}

// clamp rewrites the file's oomScoreAdj (at process.oomScoreAdj in a bundle config, at the
// top level in a process file) to 0 when it is negative, and leaves the file alone otherwise.
func clamp(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	target := doc
	if p, ok := doc["process"].(map[string]any); ok {
		target = p
	}
	v, ok := target["oomScoreAdj"].(float64)
	if !ok || v >= 0 {
		return nil
	}
	target["oomScoreAdj"] = 0
	out, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if err := os.WriteFile(path, out, st.Mode().Perm()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
