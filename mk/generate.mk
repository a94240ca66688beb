# Code generated from the Go types: the RdmaPool CRD (api/rdma.dra.io/v1alpha1 ->
# the chart's crds/). controller-gen runs from the Go module proxy at a pinned version,
# outside the driver's go.mod.

CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
CRD_DIR := deployments/helm/rdma-dra-driver/crds

.PHONY: generate
generate: ## write the RdmaPool CRD from the Go types into the chart's crds/
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:dir=$(CRD_DIR)

.PHONY: generate-check
generate-check: ## fail if the CRD in the chart differs from what make generate writes
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(CONTROLLER_GEN) crd paths=./api/... output:crd:dir="$$tmp" && \
	  if ! diff -ru $(CRD_DIR) "$$tmp"; then \
	    echo "$(CRD_DIR) is stale: run make generate and commit the result" >&2; exit 1; \
	  fi
