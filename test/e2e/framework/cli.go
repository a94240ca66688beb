package framework

import (
	"context"
	"fmt"
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

// RdmaDra runs the driver's CLI (cmd/rdma-dra), built from the repository's tree into
// _output/e2e once per run of the suite, and returns its standard output and standard
// error apart.
func (e *Env) RdmaDra(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	rdmaDra.once.Do(func() {
		rdmaDra.path = filepath.Join(e.Repo, "_output", "e2e", "rdma-dra")
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
