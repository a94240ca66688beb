# Local single-node cluster built from source (docs/local-cluster.md), the driver image
# assembled without a container engine, and the driver installed on it in mock mode.
CLUSTER_TOOL := _output/cluster-cache/tools/localcluster
# Options, also read from the environment: FIXTURE=DIR (node tree with sys/ and dev/),
# MOCK_PROFILE, FEATURE_GATES, RUNTIME_CONFIG, CONTAINERD_VERSION, KUBE_VERSION (another
# Kubernetes release, e.g. v1.34.4; default: the one test/go.mod requires), SKIP_SMOKE=1,
# SKIP_DRIVER=1 (cluster-up without the driver), DRIVER_VALUES=a.yaml,b.yaml (extra chart values).
export FIXTURE MOCK_PROFILE FEATURE_GATES RUNTIME_CONFIG CONTAINERD_VERSION KUBE_VERSION SKIP_SMOKE DRIVER_VALUES IMAGE_SOURCE
# The driver image: localhost/rdma-dra-driver:$(IMAGE_TAG), written to $(IMAGE_DIR).
# IMAGE_SOURCE=HEAD builds the committed tree instead of the working tree. The tag is the
# commit (git describe), not the release's: each rebuild installs under a new tag, so the
# kubelet runs the image just imported.
IMAGE_TAG ?= $(if $(IMAGE_SOURCE),$(shell git rev-parse --short $(IMAGE_SOURCE) 2>/dev/null),$(shell git describe --tags --always --dirty 2>/dev/null || echo dev))
IMAGE_DIR ?= _output/images
IMAGE_REPOSITORY ?= localhost/rdma-dra-driver
IMAGE_ARCHIVE := $(IMAGE_DIR)/$(notdir $(IMAGE_REPOSITORY))-$(IMAGE_TAG).oci.tar
# The binaries are stamped like `make build` does, with the image's tag as version; the
# revision label is the commit built.
IMAGE_LDFLAGS = $(call ldflags,$(IMAGE_TAG),$(GIT_COMMIT))
IMAGE_REVISION = $(if $(IMAGE_SOURCE),$(IMAGE_TAG),$(GIT_COMMIT))
CLUSTER_IMAGE_FLAGS = -version '$(IMAGE_TAG)' -image-dir '$(IMAGE_DIR)' -image-repository '$(IMAGE_REPOSITORY)'
# GO_TAGS are the build tags of the image's binaries: none for `make image-oci`, a release
# image. The local cluster's image (cluster-up, cluster-install, and so e2e and demo) has
# CLUSTER_GO_TAGS: failpoint, the test-only hooks the e2e suite drives (docs/e2e.md).
GO_TAGS ?=
CLUSTER_GO_TAGS ?= failpoint

.PHONY: cluster-tool
cluster-tool:
	@mkdir -p $(dir $(CLUSTER_TOOL))
	@cd test && $(GO) build -o ../$(CLUSTER_TOOL) ./cluster/cmd/localcluster

.PHONY: cluster-build
cluster-build: cluster-tool ## build the local cluster's binaries into _output/cluster-cache (no root needed)
	$(CLUSTER_TOOL) build

.PHONY: image-oci
image-oci: cluster-tool ## build the driver image as an OCI archive, no container engine: $(IMAGE_DIR)/rdma-dra-driver-$(IMAGE_TAG).oci.tar
	$(CLUSTER_TOOL) $(CLUSTER_IMAGE_FLAGS) -ldflags '$(IMAGE_LDFLAGS)' -revision '$(IMAGE_REVISION)' -tags '$(GO_TAGS)' image

.PHONY: cluster-up
cluster-up: cluster-tool ## start the local cluster and install the driver in mock mode (root); FIXTURE=DIR for another mock node
	$(CLUSTER_TOOL) up
ifneq ($(SKIP_DRIVER),1)
	@$(MAKE) --no-print-directory image-oci $(BIN_DIR)/helm GO_TAGS='$(CLUSTER_GO_TAGS)'
	$(CLUSTER_TOOL) $(CLUSTER_IMAGE_FLAGS) -helm '$(HELM)' install
endif

.PHONY: cluster-install
cluster-install: GO_TAGS = $(CLUSTER_GO_TAGS)
cluster-install: cluster-tool image-oci $(BIN_DIR)/helm ## (re)install the driver's chart on the running local cluster (root)
	$(CLUSTER_TOOL) $(CLUSTER_IMAGE_FLAGS) -helm '$(HELM)' install

.PHONY: cluster-down
cluster-down: cluster-tool ## uninstall the driver (best effort), stop the local cluster and remove its state (root); logs stay
	-$(CLUSTER_TOOL) -helm '$(HELM)' uninstall
	$(CLUSTER_TOOL) down

.PHONY: cluster-status
cluster-status: cluster-tool ## show the local cluster's processes and node
	$(CLUSTER_TOOL) status

.PHONY: cluster-smoke
cluster-smoke: cluster-tool ## run the smoke test against the running local cluster (root)
	$(CLUSTER_TOOL) smoke

.PHONY: cluster-restart-kubelet
cluster-restart-kubelet: cluster-tool ## restart the local cluster's kubelet with the same command line (root)
	$(CLUSTER_TOOL) restart kubelet

.PHONY: cluster-test
cluster-test: ## unit tests of the local cluster tool
	cd test && $(GO) test -count=1 ./cluster/...

.PHONY: cluster-import
cluster-import: cluster-tool ## import OCI image archives into the local cluster: IMAGES="a.tar b.tar" (root)
	$(CLUSTER_TOOL) import $(IMAGES)
