# Code generated from the Go types of api/rdma.dra.io/v1alpha1: the RdmaPool CRD (into the
# chart's crds/) and the deep copies (zz_generated.deepcopy.go) by controller-gen, and the
# typed clientset, listers and informers of RdmaPools (pkg/client) by k8s.io/code-generator.
# make generate then writes the RdmaPool part of the chart's values.schema.json from the
# CRD (manifests.mk); make manifests-check fails when that part is stale.
# Both run from the Go module proxy at pinned versions, outside the driver's go.mod; the
# code generator's version is the Kubernetes libraries' (go.mod).

CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
CODE_GENERATOR_VERSION ?= v0.37.1
CODE_GENERATOR := k8s.io/code-generator/cmd
CRD_DIR := deployments/helm/rdma-dra-driver/crds
API_DIR := api/rdma.dra.io/v1alpha1
CLIENT_DIR := pkg/client
MODULE := github.com/rdma-dra/rdma-dra-driver

# client-code writes the clientset, listers and informers below $(1) (a directory that
# stands for $(CLIENT_DIR)). Files carry no header but the generators' own line.
define client-code
$(GO) run $(CODE_GENERATOR)/client-gen@$(CODE_GENERATOR_VERSION) --go-header-file /dev/null \
	  --clientset-name versioned --input-base $(MODULE)/api --input rdma.dra.io/v1alpha1 \
	  --output-dir $(1)/clientset --output-pkg $(MODULE)/$(CLIENT_DIR)/clientset && \
	$(GO) run $(CODE_GENERATOR)/lister-gen@$(CODE_GENERATOR_VERSION) --go-header-file /dev/null \
	  --output-dir $(1)/listers --output-pkg $(MODULE)/$(CLIENT_DIR)/listers ./$(API_DIR) && \
	$(GO) run $(CODE_GENERATOR)/informer-gen@$(CODE_GENERATOR_VERSION) --go-header-file /dev/null \
	  --versioned-clientset-package $(MODULE)/$(CLIENT_DIR)/clientset/versioned \
	  --listers-package $(MODULE)/$(CLIENT_DIR)/listers \
	  --output-dir $(1)/informers --output-pkg $(MODULE)/$(CLIENT_DIR)/informers ./$(API_DIR)
endef

.PHONY: generate
generate: ## write the RdmaPool CRD into the chart's crds/, the API's deep copies and pkg/client (clientset, listers, informers), from the Go types; then the RdmaPool part of the chart's values schema, from the CRD
	$(CONTROLLER_GEN) crd object paths=./api/... output:crd:dir=$(CRD_DIR)
	rm -rf $(CLIENT_DIR)
	$(call client-code,$(CLIENT_DIR))
	$(VALUES_SCHEMA_GEN)

.PHONY: generate-check
generate-check: ## fail if the CRD, the deep copies or pkg/client differ from what make generate writes
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(CONTROLLER_GEN) crd object paths=./api/... output:crd:dir="$$tmp/crds" output:object:dir="$$tmp/api" && \
	  $(call client-code,"$$tmp/client") && \
	  stale=0; \
	  diff -ru $(CRD_DIR) "$$tmp/crds" || stale=1; \
	  diff -u $(API_DIR)/zz_generated.deepcopy.go "$$tmp/api/zz_generated.deepcopy.go" || stale=1; \
	  diff -ru $(CLIENT_DIR) "$$tmp/client" || stale=1; \
	  if [ $$stale = 1 ]; then echo "generated code is stale: run make generate and commit the result" >&2; exit 1; fi
