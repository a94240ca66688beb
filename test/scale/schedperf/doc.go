// Package schedperf runs Kubernetes' own scheduler benchmark, scheduler_perf of
// k8s.io/kubernetes (test/integration/scheduler_perf), with this driver's ResourceSlices
// beside the suite's reference test driver's: same nodes, same pods, same run, so that
// the DRA scheduling throughput of the two can be compared on one machine.
//
// scheduler_perf creates objects from YAML templates (its createAny op renders one
// object per call with Go's text/template and an .Index counter). This package writes
// those templates for our side: one per ResourceSlice of a mock node, built by
// pkg/devicemodel as the plugin builds them, with the node name turned into the
// suite's per-index node name; the DeviceClasses of the chart's default RdmaPools; the
// claims the pods and the fill ask for; and the performance-config.yaml that ties them
// to the suite's own templates (nodes, reference slices and class, pod).
//
// The benchmark itself is behind the build tag schedperf (`make bench-schedperf`), so
// that `make test` and `go vet ./...` do not build scheduler_perf.
package schedperf
