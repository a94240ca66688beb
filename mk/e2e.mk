# The end-to-end suite on the local cluster (docs/e2e.md).
# E2E_RUN=REGEXP selects tests, E2E_TIMEOUT bounds the go test run, E2E_TEARDOWN=1 runs
# cluster-down afterwards (CI does). KUBECONFIG is set to the local cluster's, so that a
# KUBECONFIG of the caller's shell never points the suite at another cluster.
E2E_KUBECONFIG := $(CURDIR)/_output/local-cluster/kubeconfig
E2E_TIMEOUT ?= 40m
E2E_TEARDOWN ?= 0
E2E_RUN ?=

.PHONY: e2e
e2e: ## end-to-end tests on the local cluster (root): cluster-up with the driver if needed, then go test ./... in test/e2e (its own module)
	@$(MAKE) --no-print-directory cluster-up
	@rc=0; (cd test/e2e && KUBECONFIG=$(E2E_KUBECONFIG) $(GO) test -count=1 -v -timeout $(E2E_TIMEOUT) $(if $(E2E_RUN),-run '$(E2E_RUN)') ./...) || rc=$$?; \
	if [ $$rc -ne 0 ]; then $(MAKE) --no-print-directory e2e-logs; fi; \
	if [ "$(E2E_TEARDOWN)" = 1 ]; then $(MAKE) --no-print-directory cluster-down || true; fi; \
	exit $$rc

# The version matrix (docs/e2e.md): the TestVersion tests, the extended resource and the
# health taints on a local cluster of another Kubernetes release, built from source like the
# default one (about 15 minutes cold). A cluster of another version must be down first
# (make cluster-down). E2E_EXPECT_MODEL is the device model the plugin must choose there by
# itself: legacy before 1.36, where DRAPartitionableDevices and DRAConsumableCapacity are off.
E2E_KUBE_VERSION ?= v1.34.4
E2E_VERSION_RUN := ^(TestVersion[A-Za-z]*|TestLegacyExtendedResource)$$
E2E_EXPECT_MODEL ?= $(if $(filter v1.34.% v1.35.%,$(E2E_KUBE_VERSION)),legacy,partitionable)

.PHONY: e2e-version
e2e-version: ## the version-matrix subset of the e2e suite on a local cluster of E2E_KUBE_VERSION (default v1.34.4, the oldest supported) (root)
	@$(MAKE) --no-print-directory cluster-up KUBE_VERSION=$(E2E_KUBE_VERSION)
	@rc=0; (cd test/e2e && KUBECONFIG=$(E2E_KUBECONFIG) E2E_EXPECT_MODEL=$(E2E_EXPECT_MODEL) $(GO) test -count=1 -v -timeout $(E2E_TIMEOUT) -run '$(E2E_VERSION_RUN)' .) || rc=$$?; \
	if [ $$rc -ne 0 ]; then $(MAKE) --no-print-directory e2e-logs; fi; \
	if [ "$(E2E_TEARDOWN)" = 1 ]; then $(MAKE) --no-print-directory cluster-down KUBE_VERSION=$(E2E_KUBE_VERSION) || true; fi; \
	exit $$rc

.PHONY: e2e-logs
e2e-logs: ## print the tails of the local cluster's logs and of the plugin's log
	@for f in _output/local-cluster/logs/*.log; do [ -f "$$f" ] || continue; echo "=== $$f (last 30 lines)"; tail -n 30 "$$f"; done
	@echo "=== plugin pods"; _output/bin/kubectl --kubeconfig _output/local-cluster/kubeconfig -n rdma-dra-driver get pods -o wide 2>&1 || true
	@echo "=== plugin log (last 60 lines)"; _output/bin/kubectl --kubeconfig _output/local-cluster/kubeconfig -n rdma-dra-driver logs daemonset/rdma-dra-driver-kubelet-plugin --tail=60 2>&1 || true
