// Package e2e is the end-to-end suite of the driver: real pods with real claims, checked by
// what their containers see. `make e2e` brings the local cluster up, installs the driver
// (mock mode, dgx-h100 node) and runs it; KUBECONFIG and E2E_NODE point it at another
// cluster, where the tests that need the node's host or the mock node skip. docs/e2e.md
// lists the tests.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// shares is the number of shares per port of the suite's node config (testdata/values-e2e.yaml).
const shares = 2

// env is the cluster every test uses.
var env *framework.Env

func TestMain(m *testing.M) {
	repo, err := filepath.Abs("../..")
	if err == nil {
		env, err = framework.Load(repo)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err = setup(ctx)
		cancel()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e setup: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// setup installs the driver with the suite's values, checks that the node is the mock
// node it is said to be, and that no claim holds a port.
func setup(ctx context.Context) error {
	if err := env.Install(ctx, shares); err != nil {
		return err
	}
	if err := env.CheckMockNode(ctx); err != nil {
		return err
	}
	held, err := env.AllocatedClaims(ctx)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("claims hold ports of the node already (a demo?): %v; delete them or start afresh with make cluster-down cluster-up", held)
	}
	return nil
}
