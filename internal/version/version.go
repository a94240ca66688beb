// Package version holds the build's version, stamped through -ldflags by the Makefile and
// the Containerfile.
package version

import (
	"fmt"
	"runtime"
)

// Version and GitCommit are set at build time with
// -ldflags "-X github.com/rdma-dra/rdma-dra-driver/internal/version.Version=v0.1.0 ...".
var (
	Version   = "v0.0.0-dev"
	GitCommit = "unknown"
)

// String returns a one-line description of the build.
func String() string {
	return fmt.Sprintf("%s (commit %s, %s, %s/%s)", Version, GitCommit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
