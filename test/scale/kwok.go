package scale

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
)

// KwokModule is the module that pins kwok (test/scale/kwok/go.mod), relative to the
// repository root.
const KwokModule = "test/scale/kwok"

// kwokStages are kwok's own stage files the harness runs it with, from the pinned
// module: nodes become Ready at once and keep a lease, bound pods become Running at once
// and go when deleted.
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// ResolveKwok finds the pinned kwok module in the module cache (the build of kwok put it
// there) and returns its version and the paths of its stage files.
func ResolveKwok(ctx context.Context, repo string) (version string, stages []string, err error) {
	cmd := exec.CommandContext(ctx, controlplane.GoCommand(), "list", "-m", "-f", "{{.Version}} {{.Dir}}", "sigs.k8s.io/kwok")
	cmd.Dir = filepath.Join(repo, KwokModule)
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("find the kwok module of %s (make bench-scale downloads it): %w", KwokModule, err)
	}
	version, dir, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok || dir == "" {
		return "", nil, fmt.Errorf("the kwok module of %s is not in the module cache; run make bench-scale", KwokModule)
	}
	for _, s := range kwokStages {
		stages = append(stages, filepath.Join(dir, s))
	}
	return version, stages, nil
}
