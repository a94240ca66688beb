# Performance report (docs/benchmarks.md, test/bench). Options, also read from the
# environment: BENCH_SMOKE=1 (quick end-to-end check of the harness, for CI; writes
# _output/bench/results.json but not the report), BENCH_IDLE (idle time before the plugin's
# RSS is read, default 60s), BENCH_FLIPS (port flips, default 6), BENCH_REPORT (report path),
# BENCH_PLUGIN_BIN (measure a prebuilt plugin instead of the tree).
# Needs etcd and kube-apiserver in _output/cluster-cache: cluster-build makes them (about
# 15 minutes cold on 2 cores, nothing when cached). The figures beside the report are SVG
# (docs/benchmarks-*.svg, drawn with gonum/plot through test/internal/plotsvg, as
# bench-scale's); `make bench-tool && _output/bench/rdma-dra-bench -from-json
# _output/bench/results.json` renders the report and its figures again without measuring.
# The comparison with the reference driver builds sigs.k8s.io/dra-example-driver's kubelet
# plugin at the version test/bench/reference/go.mod pins, from the Go module proxy (or the
# module cache) into _output/bench/bin; go.sum there pins every module's hash.
BENCH_TOOL := _output/bench/rdma-dra-bench
export BENCH_SMOKE BENCH_IDLE BENCH_FLIPS BENCH_REPORT BENCH_PLUGIN_BIN

.PHONY: bench-tool
bench-tool:
	@mkdir -p $(dir $(BENCH_TOOL))
	@cd test && $(GO) build -o ../$(BENCH_TOOL) ./bench/cmd/rdma-dra-bench

.PHONY: bench-report
bench-report: cluster-build bench-tool ## measure the performance figures into docs/benchmarks.md and _output/bench/results.json (BENCH_SMOKE=1: quick check)
	$(BENCH_TOOL) -repo $(CURDIR)

.PHONY: bench-test
bench-test: ## unit tests and Go benchmarks of the benchmark harness
	cd test && $(GO) test -count=1 ./bench/...
	cd test && $(GO) test -run '^$$' -bench . -benchtime 5x ./bench/...

# Scale with the real scheduler (test/scale, docs/benchmarks.md "Scale with the real
# scheduler"): NODES simulated nodes (comma-separated sizes, default 1000) kept Ready by
# kwok, built from the Go module proxy at the version test/scale/kwok/go.mod pins (about
# 1.5 minutes cold). SCALE_SMOKE=1 is a quick check of the harness (CI); SCALE_FLAGS passes
# more flags (-pods, -fills, -latency-pods, -latency-rate, -idle, -flaps).
SCALE_TOOL := _output/scale/rdma-dra-scale
KWOK_BIN := _output/scale/bin/kwok
NODES ?= 1000
SCALE_FLAGS ?=

.PHONY: bench-scale
bench-scale: cluster-build ## the scheduler at scale with kwok nodes, against the device plugin's extended resource: _output/bench/scale.json (NODES=1000, SCALE_SMOKE=1)
	@mkdir -p $(dir $(KWOK_BIN))
	cd test/scale/kwok && $(GO) build -trimpath -mod=readonly -o $(CURDIR)/$(KWOK_BIN) sigs.k8s.io/kwok/cmd/kwok
	cd test && $(GO) build -o $(CURDIR)/$(SCALE_TOOL) ./scale/cmd/rdma-dra-scale
	$(SCALE_TOOL) -repo $(CURDIR) -nodes $(NODES) $(if $(filter 1,$(SCALE_SMOKE)),-smoke) $(SCALE_FLAGS)

# Kubernetes' own scheduler benchmark (test/scale/schedperf, docs/benchmarks-schedperf.md):
# scheduler_perf of k8s.io/kubernetes at the version test/go.mod pins, with an in-process
# apiserver and scheduler on the cached etcd, our slices (the default model and its
# alternatives) against the suite's reference driver's in one run. Then the same for the
# reference and the default model with the patched scheduler: the allocator's caches of
# test/scale/schedperf/upstreampatch, applied to a copy of k8s.io/dynamic-resource-allocation
# that only this run's -modfile names (never what the project ships). The 1000-node
# workloads by default; SCHEDPERF_SMOKE=1 runs the 50-node ones instead, a quick check.
# Results: the benchmark output (SchedulingThroughput/Average etc., for benchstat) in
# $(SCHEDPERF_OUT)/bench.txt, scheduler_perf's JSON, and ratios.json (ours / the
# reference's); the patched run's in $(SCHEDPERF_OUT)/patched; a failed workload's log
# in logs/ below each.
SCHEDPERF_OUT := _output/bench/schedperf
SCHEDPERF_FILTER = $(if $(filter 1,$(SCHEDPERF_SMOKE)),smoke,performance)
SCHEDPERF_PATCHED := _output/schedperf-patched

# schedperf runs the benchmark: $(1) extra go test flags, $(2) the output directory,
# $(3) the label filter, $(4) the scheduler it must have been built with.
define schedperf
@mkdir -p $(2)/logs
set -o pipefail; cd test && SCHEDPERF_SCHEDULER=$(4) ARTIFACTS=$(CURDIR)/$(2)/logs $(GO) test $(1) -tags schedperf -vet=off -count=1 \
  -run '^$$' -bench '^BenchmarkPerfScheduling$$' -benchtime=1x -timeout 60m ./scale/schedperf/ \
  -args -data-items-dir=$(CURDIR)/$(2) -perf-scheduling-label-filter=$(3) \
  | tee $(CURDIR)/$(2)/bench.txt
endef

.PHONY: bench-schedperf
bench-schedperf: cluster-build ## scheduler_perf's DRA throughput, ours against its reference driver's, upstream and patched scheduler: _output/bench/schedperf (SCHEDPERF_SMOKE=1: 50 nodes)
	$(call schedperf,,$(SCHEDPERF_OUT),$(SCHEDPERF_FILTER),upstream)
	cd test && $(GO) run ./scale/cmd/rdma-dra-schedperf-patch -out $(CURDIR)/$(SCHEDPERF_PATCHED) > $(CURDIR)/$(SCHEDPERF_PATCHED).modfile
	$(call schedperf,-modfile=$$(cat $(CURDIR)/$(SCHEDPERF_PATCHED).modfile),$(SCHEDPERF_OUT)/patched,$(SCHEDPERF_FILTER)$(comma)-alternative,patched)
