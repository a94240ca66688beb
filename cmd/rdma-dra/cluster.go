package main

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
)

// The resources migrate reads from a cluster.
var (
	deviceClassesGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}
	rdmaPoolsGVR     = v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.RdmaPoolResource)
)

// restConfig loads a kubeconfig as kubectl does: the file if named, else KUBECONFIG, else
// ~/.kube/config. clientcmd.IsEmptyConfig tells when there is none.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// kubeClients are migrate's clients of one cluster; it reads, never writes.
type kubeClients struct {
	dynamic dynamic.Interface
	kube    kubernetes.Interface
	// source names the cluster in messages: the kubeconfig file.
	source string
}

// newKubeClients connects with the kubeconfig file (empty: as kubectl finds one). Tests
// replace it with fake clients.
var newKubeClients = func(kubeconfig string) (*kubeClients, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	source := kubeconfig
	if source == "" {
		source = "the default kubeconfig"
	}
	return &kubeClients{dynamic: dyn, kube: kube, source: source}, nil
}

// clusterObjects lists the cluster's DeviceClasses and RdmaPools as claimants. A cluster
// without the RdmaPool CRD has no pools.
func clusterObjects(ctx context.Context, client dynamic.Interface, source string) ([]migrate.Claimant, error) {
	var items []unstructured.Unstructured
	for _, gvr := range []schema.GroupVersionResource{deviceClassesGVR, rdmaPoolsGVR} {
		list, err := client.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			if gvr == rdmaPoolsGVR && isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		items = append(items, list.Items...)
	}
	var out []migrate.Claimant
	for _, it := range items {
		data, err := json.Marshal(it.Object)
		if err != nil {
			return nil, err
		}
		cl, err := migrate.ExistingObjects(data, source)
		if err != nil {
			return nil, err
		}
		out = append(out, cl...)
	}
	return out, nil
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
