# The demo: the local cluster with a mock DGX H100 node, the driver, and the demo workloads.
.PHONY: demo
demo: ## local cluster + driver on a mock dgx-h100 node, the demo workloads, what each container sees, and a RoCE pod pair pinging over its attached rdma0 (root)
	@$(MAKE) --no-print-directory cluster-up MOCK_PROFILE=dgx-h100
	cd test/e2e && KUBECONFIG=$(CURDIR)/_output/local-cluster/kubeconfig $(GO) run ./cmd/demo -repo $(CURDIR)
