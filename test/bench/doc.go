// Package bench is the driver's performance harness: it measures the figures of
// docs/benchmarks.md against real components (etcd and kube-apiserver from the local
// cluster's binary cache, the real rdma-dra-kubeletplugin binary over its gRPC socket,
// the scheduler's structured allocator) and writes _output/bench/results.json, the report
// and its figures. `make bench-report` runs it; `BENCH_SMOKE=1` makes a quick run that
// checks the harness end to end, not the numbers.
package bench
