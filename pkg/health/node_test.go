package health

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// testNode is a mock node written to a test's directory, whose files the test changes
// the way the kernel would.
type testNode struct {
	t    testing.TB
	root string // the sysfs root
}

func newTestNode(t testing.TB, profile string) *testNode {
	t.Helper()
	dir := t.TempDir()
	if err := mocknode.WriteProfile(profile, dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return &testNode{t: t, root: filepath.Join(dir, mocknode.SysDir)}
}

// discover scans the node as the publisher would.
func (n *testNode) discover() *discovery.Inventory {
	n.t.Helper()
	inv, err := discovery.New(discovery.Options{SysfsRoot: n.root}).Discover(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	return inv
}

func (n *testNode) portFile(ibdev string, port int, file string) string {
	return filepath.Join(n.root, "class/infiniband", ibdev, "ports", strconv.Itoa(port), file)
}

// write replaces a port's file with content, as sysfs shows it (trailing newline).
func (n *testNode) write(ibdev string, port int, file, content string) {
	n.t.Helper()
	if err := os.WriteFile(n.portFile(ibdev, port, file), []byte(content+"\n"), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// setState writes a port's state and phys_state, e.g. "1: DOWN", "3: Disabled".
func (n *testNode) setState(ibdev string, port int, state, phys string) {
	n.t.Helper()
	n.write(ibdev, port, "state", state)
	n.write(ibdev, port, "phys_state", phys)
}

// unplug removes the device's class link, as unbinding its driver does, and returns a
// function that plugs it back.
func (n *testNode) unplug(ibdev string) (plug func()) {
	n.t.Helper()
	link := filepath.Join(n.root, "class/infiniband", ibdev)
	target, err := os.Readlink(link)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		n.t.Fatal(err)
	}
	return func() {
		n.t.Helper()
		if err := os.Symlink(target, link); err != nil {
			n.t.Fatal(err)
		}
	}
}
