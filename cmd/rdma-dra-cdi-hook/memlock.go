package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// errUsage marks errors in the command line, which exit with a code of their own.
var errUsage = errors.New("usage")

// maxStateBytes bounds what is read from stdin; an OCI state is a few hundred bytes.
const maxStateBytes = 1 << 20

// usage is printed with command-line errors.
const usage = `usage: rdma-dra-cdi-hook memlock --limit BYTES|unlimited < container-state.json
       rdma-dra-cdi-hook attached --dir DIR --claim UID < container-state.json

memlock runs as an OCI createContainer hook: raises RLIMIT_MEMLOCK (soft and hard) of
the container process named by the state on stdin to at least the limit. It never
lowers a limit.

attached runs as an OCI createRuntime hook of claims whose network is attached into the
pod: it fails the container's start until the kubelet plugin has marked the claim's
attachments into the container's pod (its UID from the state's annotations) as complete
in DIR.`

// run is the program without its process wiring: args exclude the program name.
func run(ctx context.Context, args []string, stdin io.Reader) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch args[0] {
	case "memlock":
		return memlock(ctx, args[1:], stdin)
	case "attached":
		return attached(ctx, args[1:], stdin)
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
}

// memlock is the memlock command.
func memlock(ctx context.Context, args []string, stdin io.Reader) error {
	fs := flag.NewFlagSet("memlock", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned and reported once, with the usage
	limitArg := fs.String("limit", "", "RLIMIT_MEMLOCK in bytes, or unlimited")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	limit, err := parseLimit(*limitArg)
	if err != nil {
		return fmt.Errorf("%w: --limit: %w", errUsage, err)
	}
	state, err := readState(stdin)
	if err != nil {
		return err
	}
	return raiseMemlock(ctx, state, limit)
}

// parseLimit parses "unlimited" or a positive number of bytes.
func parseLimit(s string) (uint64, error) {
	switch s {
	case "":
		return 0, errors.New("missing")
	case "unlimited":
		return unix.RLIM_INFINITY, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n == unix.RLIM_INFINITY {
		return 0, fmt.Errorf("%q is not a positive number of bytes or unlimited", s)
	}
	return n, nil
}

// readState decodes the OCI container state the runtime writes to a hook's stdin.
func readState(r io.Reader) (*specs.State, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxStateBytes))
	if err != nil {
		return nil, fmt.Errorf("read container state: %w", err)
	}
	var state specs.State
	if err := json.Unmarshal(data, &state); err != nil {
		return nil, fmt.Errorf("decode container state from stdin: %w", err)
	}
	if state.Pid <= 0 {
		return nil, fmt.Errorf("container state of %q has no pid (%d)", state.ID, state.Pid)
	}
	return &state, nil
}

// raiseMemlock raises the soft and the hard limit of the container's process to at least
// limit. A limit already higher stays: the hook only ever grants.
func raiseMemlock(ctx context.Context, state *specs.State, limit uint64) error {
	logger := klog.FromContext(ctx).WithValues("container", state.ID, "pid", state.Pid)
	var old unix.Rlimit
	if err := unix.Prlimit(state.Pid, unix.RLIMIT_MEMLOCK, nil, &old); err != nil {
		return fmt.Errorf("read RLIMIT_MEMLOCK of pid %d: %w", state.Pid, err)
	}
	want := unix.Rlimit{Cur: max(old.Cur, limit), Max: max(old.Max, limit)}
	if want == old {
		logger.V(2).Info("RLIMIT_MEMLOCK is already high enough", "soft", fmtLimit(old.Cur), "hard", fmtLimit(old.Max))
		return nil
	}
	if err := unix.Prlimit(state.Pid, unix.RLIMIT_MEMLOCK, &want, nil); err != nil {
		return fmt.Errorf("raise RLIMIT_MEMLOCK of pid %d from %s/%s to %s/%s: %w", state.Pid,
			fmtLimit(old.Cur), fmtLimit(old.Max), fmtLimit(want.Cur), fmtLimit(want.Max), err)
	}
	logger.Info("Raised RLIMIT_MEMLOCK",
		"oldSoft", fmtLimit(old.Cur), "oldHard", fmtLimit(old.Max),
		"soft", fmtLimit(want.Cur), "hard", fmtLimit(want.Max))
	return nil
}

func fmtLimit(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}
