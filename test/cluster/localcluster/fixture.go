package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// DefaultFixtureName is what UseFixture takes for the mock node the cluster came up with.
const DefaultFixtureName = "default"

// ProfileFixture is the directory UseFixture writes the mock node of profile to.
func (l Layout) ProfileFixture(profile string) string {
	return filepath.Join(l.Out, "mock-profiles", profile)
}

// upFixtureRecord keeps the target MockRoot had before the first UseFixture.
func (l Layout) upFixtureRecord() string { return filepath.Join(StateRoot, "mock-up-target") }

// UseFixture makes the mock node of profile the node's: it writes the profile's tree
// (once) and points MockRoot at it; DefaultFixtureName points it back at the tree the
// cluster came up with. The plugins see the new tree once their pods restart (hostPath
// mounts resolve the link when a pod starts); the caller restarts them. Claims prepared
// on the old tree must be gone first: their devices do not exist on the new one.
func (c *Cluster) UseFixture(ctx context.Context, profile string) error {
	l := c.Layout
	current, err := os.Readlink(l.MockRoot())
	if err != nil {
		return fmt.Errorf("the mock node link %s: %w (is the cluster up?)", l.MockRoot(), err)
	}
	upTarget, err := os.ReadFile(l.upFixtureRecord())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		upTarget = []byte(current)
		if err := os.WriteFile(l.upFixtureRecord(), upTarget, 0o644); err != nil {
			return fmt.Errorf("record the cluster's mock node: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read the cluster's mock node: %w", err)
	}
	target := string(upTarget)
	if profile != DefaultFixtureName {
		if _, err := mocknode.Lookup(profile); err != nil {
			return err
		}
		target, err = filepath.Abs(l.ProfileFixture(profile))
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(target, "sys")); err != nil {
			cmd := exec.CommandContext(ctx, c.Go, "run", "./cmd/rdma-dra", "mock-node", "--profile", profile, "--out", target, "--force", "--mknod")
			cmd.Dir = l.Repo
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("write mock node %s: %w: %s", profile, err, strings.TrimSpace(string(out)))
			}
		}
	}
	if target == current {
		return nil
	}
	// A new link renamed over the old one: MockRoot never dangles.
	tmp := l.MockRoot() + ".next"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("link the mock node: %w", err)
	}
	if err := os.Rename(tmp, l.MockRoot()); err != nil {
		return fmt.Errorf("link the mock node: %w", err)
	}
	c.Log.Info("mock node switched", "profile", profile, "target", target)
	return nil
}
