// Command pause is the local cluster's pod sandbox process: it holds the pod's namespaces
// open and does nothing until SIGINT or SIGTERM, and reaps orphaned children while it waits
// (it is PID 1 of the pod when the pod shares its PID namespace). It is built statically
// (CGO_ENABLED=0) and packed into localhost/pause:latest, because the cluster has no registry.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (rdma-dra-driver local cluster)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
