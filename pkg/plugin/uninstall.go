package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// Uninstall detection. When the plugin stops (SIGTERM), it asks whether its DaemonSet is
// going away. Only then does it remove what it put on the node; a rolling update, a pod
// deletion or a node drain keep everything for the next instance.
//
// Why the answer is read this way: `helm uninstall` deletes the DaemonSet, the RBAC
// objects and the ServiceAccount within milliseconds of each other, and the pods are
// deleted by the garbage collector afterwards. By the time the plugin gets SIGTERM, the
// DaemonSet is usually gone (NotFound) or, with foreground deletion, has a deletion
// timestamp; its permission to look may be gone too (Forbidden), or its ServiceAccount
// (Unauthorized). All four mean "uninstalled". Any other error (timeout, connection
// refused) is not an answer, and the plugin keeps everything.

// UninstallReason returns why the DaemonSet namespace/name counts as uninstalled, or ""
// when it is still there and not being deleted, or when the API gave no clear answer.
func UninstallReason(ctx context.Context, kube kubernetes.Interface, namespace, name string) string {
	ds, err := kube.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil && ds.DeletionTimestamp != nil:
		return "DaemonSet is being deleted"
	case err == nil:
		return ""
	case apierrors.IsNotFound(err):
		return "DaemonSet is gone"
	case apierrors.IsForbidden(err):
		return "permission to read the DaemonSet is gone"
	case apierrors.IsUnauthorized(err):
		return "service account is gone"
	default:
		klog.FromContext(ctx).Error(err, "Could not tell whether the plugin is being uninstalled; keeping its files", "daemonSet", namespace+"/"+name)
		return ""
	}
}

// UninstallCleanup removes what the plugin put on the node once it is uninstalled, only
// when no claim is prepared: the hook binary it installed, its CDI specs, its checkpoint
// and its data directory. With prepared claims everything stays and the reason is
// logged: a reinstall adopts the checkpoint and unprepares them, and the hook stays
// because the CDI specs of those claims name it, so a restarting container of a running
// pod that asked for a memlock limit still starts. Only this installation's files are
// touched: the hook by its own path (cdi.HookFileName) and the specs of its own CDI kind
// (cdi.Vendor), never another installation's in the same directories. Call it after the
// kubelet plugin helper has stopped, so that its sockets are closed.
func UninstallCleanup(ctx context.Context, cfg Config, hookPath string, store *checkpoint.Store, specs SpecWriter) error {
	logger := klog.FromContext(ctx)
	var errs []error
	unlock, err := store.Lock()
	if err != nil {
		return err
	}
	loaded, err := store.Load()
	if err != nil {
		unlock()
		return fmt.Errorf("load checkpoint: %w", err)
	}
	if n := len(loaded.Checkpoint.Claims); n > 0 {
		unlock()
		logger.Info("Uninstalled with prepared claims; keeping the checkpoint, their CDI specs and the memlock hook for a reinstall",
			"claims", checkpoint.SortedUIDs(loaded.Checkpoint), "checkpoint", store.Path(), "hook", hookPath)
		return nil
	}
	if hookPath != "" {
		if err := os.Remove(hookPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove hook %s: %w", hookPath, err))
		} else {
			logger.Info("Removed the memlock hook", "path", hookPath)
		}
	}
	uids, err := specs.List()
	if err != nil {
		errs = append(errs, fmt.Errorf("list CDI specs: %w", err))
	}
	for _, uid := range uids {
		// No entry in the checkpoint: the spec belongs to no prepared claim.
		if err := specs.Remove(ctx, uid); err != nil {
			errs = append(errs, err)
		}
	}
	if err := metadataFiles(cfg).removeAll(); err != nil {
		errs = append(errs, err)
	}
	unlock()
	if err := removeDir(cfg.DataDir()); err != nil {
		errs = append(errs, err)
	} else {
		logger.Info("Removed the plugin's data directory", "path", cfg.DataDir(), "orphanedSpecs", len(uids))
	}
	return errors.Join(errs...)
}

// removeDir removes dir and everything in it. The chart mounts the data directory itself
// from the host, so the directory is a mount point in the container and cannot go (EBUSY):
// then it stays, empty, and the kubelet's hostPath leaves an empty directory on the host.
func removeDir(dir string) error {
	if err := clearDir(dir); err != nil {
		return fmt.Errorf("clear data directory %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, syscall.EBUSY) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove data directory %s: %w", dir, err)
	}
	return nil
}

// cleanupIfUninstalled runs after the plugin stopped on a signal: when its DaemonSet is
// going away it cleans the node (see UninstallCleanup). It uses its own short deadline
// because the plugin's context is already done.
func cleanupIfUninstalled(ctx context.Context, cfg Config, kube kubernetes.Interface, hookPath string, store *checkpoint.Store, specs SpecWriter) {
	if cfg.DaemonSetName == "" || cfg.Namespace == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	logger := klog.FromContext(ctx)
	reason := UninstallReason(ctx, kube, cfg.Namespace, cfg.DaemonSetName)
	if reason == "" {
		logger.Info("DaemonSet still present; keeping the node's state for the next plugin instance")
		return
	}
	logger.Info("Plugin is being uninstalled; cleaning up the node", "reason", reason, "hook", hookPath,
		"dataDir", cfg.DataDir(), "cdiRoot", cfg.CDIRoot)
	if err := UninstallCleanup(ctx, cfg, hookPath, store, specs); err != nil {
		logger.Error(err, "Uninstall cleanup incomplete")
	}
	deleteSlices(ctx, kube, cfg.DriverName, cfg.NodeName)
}

// deleteSlices deletes the node's ResourceSlices of this driver, best effort: the
// permission may already be gone, and the kubelet removes the slices of a driver that
// stays unregistered anyway.
func deleteSlices(ctx context.Context, kube kubernetes.Interface, driver, node string) {
	logger := klog.FromContext(ctx)
	list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + driver + ",spec.nodeName=" + node,
	})
	if err != nil {
		logger.Info("Could not list the node's ResourceSlices; the kubelet removes them once the plugin stays unregistered", "err", err)
		return
	}
	for _, s := range list.Items {
		if err := kube.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			logger.Info("Could not delete a ResourceSlice; the kubelet removes it once the plugin stays unregistered", "slice", s.Name, "err", err)
			continue
		}
		logger.Info("Deleted ResourceSlice", "slice", s.Name)
	}
}
