package main

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
)

func TestClusterObjects(t *testing.T) {
	obj := func(apiVersion, kind, name, ern string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name}, "spec": map[string]any{}}}
		if ern != "" {
			u.Object["spec"].(map[string]any)["extendedResourceName"] = ern
		}
		return u
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{deviceClassesGVR: "DeviceClassList", rdmaPoolsGVR: "RdmaPoolList"},
		obj("resource.k8s.io/v1", "DeviceClass", "gpu", ""),
		obj("resource.k8s.io/v1", "DeviceClass", "legacy-rdma", "rdma/hca_shared_devices_a"),
		obj("rdma.dra.io/v1alpha1", "RdmaPool", "ib", "rdma/ib"),
	)
	got, err := clusterObjects(context.Background(), client, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	want := []migrate.Claimant{
		{Kind: "DeviceClass", Name: "gpu", Source: "cluster"},
		{Kind: "DeviceClass", Name: "legacy-rdma", ExtendedResourceName: "rdma/hca_shared_devices_a", Source: "cluster"},
		{Kind: "RdmaPool", Name: "ib", ExtendedResourceName: "rdma/ib", Source: "cluster"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("claimants %+v, want %+v", got, want)
	}
}
