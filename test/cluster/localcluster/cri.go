package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removeAllPods stops and removes every pod sandbox through the CRI, so that containerd
// tears down their networks (CNI DEL), network namespaces and mounts before it stops. The
// kubelet must already be stopped, or it would start them again.
func removeAllPods(ctx context.Context, l Layout, log *slog.Logger) error {
	conn, err := grpc.NewClient("unix://"+l.ContainerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to containerd's CRI: %w", err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range resp.Items {
		log := log.With("pod", sb.GetMetadata().GetNamespace()+"/"+sb.GetMetadata().GetName(), "sandbox", sb.Id[:12])
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.Id, err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
			continue
		}
		log.Info("removed pod sandbox")
	}
	return errors.Join(errs...)
}
