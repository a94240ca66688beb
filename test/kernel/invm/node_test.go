//go:build kernelvm

package invm

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/test/kernel/rdmacore"
)

// envInVM is set by the VM's /init. Without it the binary is on a real node, where only
// the read-only TestNodeMatchesRdmaCore may run: every other test creates interfaces and
// RDMA devices or switches the node's RDMA netns mode.
const envInVM = "RDMA_DRA_KERNEL_VM"

// nodeCheck is the one test that runs outside the VM.
const nodeCheck = "^TestNodeMatchesRdmaCore$"

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(envInVM) != "1" {
		if err := flag.Set("test.run", nodeCheck); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "not in the test VM (%s is not 1): running the read-only %s only\n", envInVM, nodeCheck)
	}
	os.Exit(m.Run())
}

// TestNodeMatchesRdmaCore compares every port the driver finds on the node with
// rdma-core's view, changing nothing: on a real node (docs/kernel-tests.md). In the VM it
// first makes a soft-RoCE port to compare.
func TestNodeMatchesRdmaCore(t *testing.T) {
	if os.Getenv(envInVM) == "1" {
		r := newRoCE(t, "rxe7", "veth7", "veth7p")
		run(t, "ip", "addr", "add", "192.168.82.1/24", "dev", r.Netdev)
		eventually(t, "rxe7's IPv4 GID", func() (bool, string) {
			_, p := readDevinfo(t).port(r.IBDev, 1)
			if p != nil && rdmacore.RoCEv2GIDIndex(p.GIDs) >= 0 {
				return true, ""
			}
			return false, "no RoCE v2 IPv4 entry yet"
		})
	}
	before := readRdmaCore(t)
	inv := discoverCLI(t)
	if len(inv.Ports) == 0 {
		t.Fatal("the driver finds no RDMA port on this node")
	}
	if after := readRdmaCore(t); fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("the node changed while the driver read it; run again")
	}
	compareInventory(t, inv, before)
	t.Logf("%d ports compared", len(inv.Ports))
}
