// Command rdma-dra-cdi-hook is the OCI hook that the CDI specs of rdma.dra.io claims add.
// The container runtime runs it with the container's state on stdin:
//   - memlock, at createContainer, when a claim asks for a memlock limit: it raises the
//     RLIMIT_MEMLOCK of the container's process, which RDMA needs to pin memory for queue
//     pairs and registered buffers;
//   - attached, at createRuntime, when a claim's network is attached into the pod: it
//     holds the container back until the kubelet plugin has made the attachment.
//
// It runs on every start of such a container, so it stays small: no flags library, no
// client, one system call or one stat.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

func main() {
	// The runtime shows a failing hook's stderr; keep logs there, structured.
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(os.Stderr)))
	ctx := klog.NewContext(context.Background(), logger)
	err := run(ctx, os.Args[1:], os.Stdin)
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		logger.Error(err, "Invalid command line")
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	default:
		logger.Error(err, "Hook failed")
		os.Exit(1)
	}
}
