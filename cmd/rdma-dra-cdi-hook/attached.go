package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/attachmark"
)

// podUIDAnnotations are where runtimes put the pod's UID in a container's OCI
// annotations: containerd's CRI and CRI-O.
var podUIDAnnotations = []string{"io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"}

// errNotAttached says that the pod's network attachments of the claim are not complete.
var errNotAttached = errors.New("the pod's RDMA network attachment is not made yet")

// attached is the attached command: it lets the container start only once the kubelet
// plugin has marked the claim's network attachments into the container's pod as
// complete (pkg/attachmark). A container the runtime created while the plugin was not
// connected to it would otherwise run without its interface and its GID index; failing
// its start makes the kubelet create it again, and the plugin then attaches and injects.
func attached(ctx context.Context, args []string, stdin io.Reader) error {
	fs := flag.NewFlagSet("attached", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "the plugin's attachment marks directory")
	claim := fs.String("claim", "", "the claim's UID")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *dir == "" || *claim == "" {
		return fmt.Errorf("%w: --dir and --claim are required", errUsage)
	}
	state, err := readState(stdin)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("container", state.ID, "claimUID", *claim)
	pod := ""
	for _, a := range podUIDAnnotations {
		if pod = state.Annotations[a]; pod != "" {
			break
		}
	}
	if pod == "" {
		// Not a Kubernetes container runtime we know: nothing to check against.
		logger.Info("The container's annotations name no pod UID; starting it without checking the network attachment", "annotations", podUIDAnnotations)
		return nil
	}
	ok, err := attachmark.Marked(*dir, pod, *claim)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: claim %s in pod %s (the kubelet plugin was not connected to the container runtime's NRI when the pod started, or is still attaching); the kubelet starts the container again, and it runs once the attachment is made",
			errNotAttached, *claim, pod)
	}
	logger.V(2).Info("The pod's network attachment is complete", "podUID", pod)
	return nil
}
