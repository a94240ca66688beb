# Code generated from the Go types of api/rdma.dra.io/v1alpha1: the RdmaPool CRD (into the
# chart's crds/) and the deep copies (zz_generated.deepcopy.go). controller-gen runs from
# the Go module proxy at a pinned version, outside the driver's go.mod.

CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
CRD_DIR := deployments/helm/rdma-dra-driver/crds
API_DIR := api/rdma.dra.io/v1alpha1

.PHONY: generate
generate: ## write the RdmaPool CRD into the chart's crds/ and the API's deep copies, from the Go types
	$(CONTROLLER_GEN) crd object paths=./api/... output:crd:dir=$(CRD_DIR)

.PHONY: generate-check
generate-check: ## fail if the CRD or the deep copies differ from what make generate writes
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(CONTROLLER_GEN) crd object paths=./api/... output:crd:dir="$$tmp/crds" output:object:dir="$$tmp/api" && \
	  stale=0; \
	  diff -ru $(CRD_DIR) "$$tmp/crds" || stale=1; \
	  diff -u $(API_DIR)/zz_generated.deepcopy.go "$$tmp/api/zz_generated.deepcopy.go" || stale=1; \
	  if [ $$stale = 1 ]; then echo "generated code is stale: run make generate and commit the result" >&2; exit 1; fi
