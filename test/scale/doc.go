// Package scale is the scheduler scale harness behind `make bench-scale`: etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager from the local cluster's
// binary cache, N simulated nodes kept Ready by kwok, each publishing the ResourceSlices
// this driver's own Publisher builds for a mock profile, and a load generator that creates
// pods with ResourceClaimTemplates (or, for the baseline, the device plugin's extended
// resource) and times how fast the real scheduler binds them. It writes
// _output/bench/scale.json; docs/benchmarks.md explains the figures.
package scale
