//go:build tools

// Package k8sbins pins, in the test module's go.mod and go.sum, every package that the
// local cluster builds from k8s.io/kubernetes with `go build`. The build tag keeps it out of
// normal builds; `go mod tidy` still sees the imports and keeps the requirements.
package k8sbins

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
