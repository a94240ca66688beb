# Local single-node cluster built from source (docs/local-cluster.md).
CLUSTER_TOOL := _output/cluster-cache/tools/localcluster
# Options, also read from the environment: FIXTURE=DIR (node tree with sys/ and dev/),
# MOCK_PROFILE, FEATURE_GATES, RUNTIME_CONFIG, CONTAINERD_VERSION, SKIP_SMOKE=1.
export FIXTURE MOCK_PROFILE FEATURE_GATES RUNTIME_CONFIG CONTAINERD_VERSION SKIP_SMOKE

.PHONY: cluster-tool
cluster-tool:
	@mkdir -p $(dir $(CLUSTER_TOOL))
	@cd test && $(GO) build -o ../$(CLUSTER_TOOL) ./cluster/cmd/localcluster

.PHONY: cluster-build
cluster-build: cluster-tool ## build the local cluster's binaries into _output/cluster-cache (no root needed)
	$(CLUSTER_TOOL) build

.PHONY: cluster-up
cluster-up: cluster-tool ## start the local cluster (root); FIXTURE=DIR for another mock node
	$(CLUSTER_TOOL) up

.PHONY: cluster-down
cluster-down: cluster-tool ## stop the local cluster and remove its state (root); logs stay
	$(CLUSTER_TOOL) down

.PHONY: cluster-status
cluster-status: cluster-tool ## show the local cluster's processes and node
	$(CLUSTER_TOOL) status

.PHONY: cluster-smoke
cluster-smoke: cluster-tool ## run the smoke test against the running local cluster (root)
	$(CLUSTER_TOOL) smoke

.PHONY: cluster-test
cluster-test: ## unit tests of the local cluster tool
	cd test && $(GO) test -count=1 ./cluster/...

.PHONY: cluster-import
cluster-import: cluster-tool ## import OCI image archives into the local cluster: IMAGES="a.tar b.tar" (root)
	$(CLUSTER_TOOL) import $(IMAGES)
