//go:build kernelvm

// Package invm holds the tests that run inside the real-kernel VM (test/kernel, make
// e2e-kernel): as root, on a Debian kernel with rdma_rxe, against rdma-core's and
// iproute2's tools. They change the VM's network and RDMA devices and must never run on
// a host; the kernelvm build tag keeps them out of every other build.
package invm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// cmdTimeout bounds every tool the tests run.
const cmdTimeout = 30 * time.Second

// run runs a command and returns its standard output; a failure fails the test with
// the command, its status and its error output.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := tryRun(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryRun runs a command and returns its standard output, or an error naming the
// command with its error output.
func tryRun(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// runJSON runs a command that prints JSON and decodes it into v.
func runJSON(t testing.TB, v any, name string, args ...string) {
	t.Helper()
	out := run(t, name, args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s %s: %v in %q", name, strings.Join(args, " "), err, out)
	}
}

// eventually polls cond every 50 ms for up to 10 s: the kernel updates GID tables and
// port states from work queues, a little after the netlink call that causes it returns.
// On timeout it fails the test with cond's last reason.
func eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ok, why := cond()
		last = why
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within 10 s: %s", what, last)
	}
}

// roce is a soft-RoCE device over one end of a veth pair whose other end is up, so that
// the port is ACTIVE.
type roce struct {
	IBDev, Netdev, Peer string
}

// newRoCE creates the veth pair and the rxe device; both go when the test ends.
func newRoCE(t testing.TB, ibdev, netdev, peer string) roce {
	t.Helper()
	run(t, "ip", "link", "add", netdev, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _, _ = tryRun("ip", "link", "del", netdev) })
	run(t, "ip", "link", "set", peer, "up")
	run(t, "ip", "link", "set", netdev, "up")
	run(t, "rdma", "link", "add", ibdev, "type", "rxe", "netdev", netdev)
	t.Cleanup(func() {
		if _, err := tryRun("rdma", "link", "delete", ibdev); err != nil {
			t.Errorf("remove %s: %v", ibdev, err)
		}
	})
	return roce{IBDev: ibdev, Netdev: netdev, Peer: peer}
}
