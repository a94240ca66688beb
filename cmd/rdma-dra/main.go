// Command rdma-dra is the operator's CLI: what a node has, what it would publish, mock
// nodes for demos and tests, the migration from the device plugins, and claim templates
// that pair GPUs with NICs. Most commands read the node only; doctor and migrate also
// read the cluster when given one, claim reads nothing (docs/cli.md).
//
// Exit status: 0 success, 1 failure (a file or node that cannot be read), 2 usage error
// (flags, arguments, input that cannot be converted faithfully), and for migrate 3 when
// every problem is a widening a flag accepts by name. docs/cli.md lists them.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
)

// envPrefix starts the environment twin of every flag: RDMA_DRA_SYSFS_ROOT.
const envPrefix = "RDMA_DRA_"

func main() {
	cliflags.Main(newApp())
}

func newApp() *cli.App {
	return cliflags.NewCLI("rdma-dra", "inspect the RDMA ports of a node the way the rdma.dra.io driver sees them", envPrefix, []*cli.Command{
		discoverCommand(),
		slicesCommand(),
		mockNodeCommand(),
		migrateCommand(),
		doctorCommand(),
		claimCommand(),
	})
}

// sysfsRootHint suggests --sysfs-root for a positional argument that is a directory.
func sysfsRootHint(arg string) string {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return fmt.Sprintf("did you mean --sysfs-root %s?", arg)
	}
	return ""
}

// warnf writes a warning line to stderr; warnings show at every verbosity.
func warnf(c *cli.Context, format string, args ...any) {
	fmt.Fprintf(c.App.ErrWriter, "warning: "+format+"\n", args...)
}
