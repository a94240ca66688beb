package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var rdmaDra struct {
	once sync.Once
	path string
	err  error
}

// RdmaDra runs the driver's CLI (cmd/rdma-dra), built from the repository's tree once per
// run of the suite, and returns its standard output and standard error apart.
func (e *Env) RdmaDra(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	rdmaDra.once.Do(func() {
		dir, err := os.MkdirTemp("", "rdma-dra-e2e-")
		if err != nil {
			rdmaDra.err = err
			return
		}
		rdmaDra.path = filepath.Join(dir, "rdma-dra")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", rdmaDra.path, "./cmd/rdma-dra")
		cmd.Dir = e.Repo
		if out, err := cmd.CombinedOutput(); err != nil {
			rdmaDra.err = fmt.Errorf("go build ./cmd/rdma-dra: %w: %s", err, out)
		}
	})
	if rdmaDra.err != nil {
		return "", "", rdmaDra.err
	}
	var out, errOut strings.Builder
	cmd := exec.CommandContext(ctx, rdmaDra.path, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = &out, &errOut, e.Repo
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("rdma-dra %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String(), nil
}
