# The driver's image for real clusters (docs/release.md): the Containerfile built by podman,
# buildah or docker for each platform of PLATFORMS, on binaries cross-compiled here; the
# build context is $(IMAGE_CONTEXT), not the repository. The local cluster's image needs no
# engine: image-oci (cluster.mk). Options, also read from the environment:
# REGISTRY (default ghcr.io/rdma-dra, the chart's), IMAGE (the whole reference, default
# $(REGISTRY)/rdma-dra-driver:v$(VERSION), the tag the chart's appVersion names),
# PLATFORMS (default linux/amd64,linux/arm64), ENGINE (podman, buildah or docker; default
# the first one installed), BASE_IMAGE (instead of the Containerfile's pinned base, e.g. a
# mirror).
RELEASE_REGISTRY := ghcr.io/rdma-dra
RELEASE_REPOSITORY := $(RELEASE_REGISTRY)/rdma-dra-driver
REGISTRY ?= $(RELEASE_REGISTRY)
IMAGE ?= $(REGISTRY)/rdma-dra-driver:$(RELEASE_TAG)
PLATFORMS ?= linux/amd64,linux/arm64
ENGINE ?=
BASE_IMAGE ?=
IMAGE_CONTEXT := _output/image
# make push writes the digest of what it pushed here (the index of a multi-platform
# image): make sign signs that digest, not a tag that could move.
IMAGE_DIGEST_FILE := $(IMAGE_CONTEXT)/pushed-digest
comma := ,
IMAGE_SCRIPT_ENV = IMAGE='$(IMAGE)' PLATFORMS='$(PLATFORMS)' ENGINE='$(ENGINE)' BASE_IMAGE='$(BASE_IMAGE)' \
	VERSION='$(RELEASE_TAG)' GIT_COMMIT='$(GIT_COMMIT)' CONTEXT='$(IMAGE_CONTEXT)' DIGEST_FILE='$(IMAGE_DIGEST_FILE)'

.PHONY: image-binaries
image-binaries: ## cross-compile the image's static binaries for each of PLATFORMS into _output/image/linux_<arch>/
	@for p in $(subst $(comma), ,$(PLATFORMS)); do \
	  arch=$${p#*/}; arch=$${arch%%/*}; dir=$(IMAGE_CONTEXT)/linux_$$arch; \
	  echo "go build $(BINARIES) for linux/$$arch into $$dir"; \
	  rm -rf "$$dir" && mkdir -p "$$dir" && \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o "$$dir/" $(addprefix ./cmd/,$(BINARIES)) || exit 1; \
	done

.PHONY: image
image: image-binaries ## build the driver image with podman, buildah or docker: IMAGE=$(REGISTRY)/rdma-dra-driver:v$(VERSION), a manifest list of PLATFORMS (ENGINE=, BASE_IMAGE=)
	$(IMAGE_SCRIPT_ENV) hack/image.sh build

.PHONY: push
push: ## push the image make image built: make image push REGISTRY=ghcr.io/me (the same VERSION, PLATFORMS and ENGINE); its digest goes to $(IMAGE_DIGEST_FILE)
	$(IMAGE_SCRIPT_ENV) hack/image.sh push

.PHONY: image-test
image-test: ## build the Containerfile with buildah (stand-in base and binaries, both platforms) and compare it with the engine-free image (root, buildah)
	@command -v buildah >/dev/null || { echo "make image-test needs buildah: apt-get install --no-install-recommends buildah" >&2; exit 1; }
	cd test && IMAGE_TEST_REQUIRE_ENGINE=1 $(GO) test -count=1 -v -run '^TestContainerfileBuild$$' ./cluster/driverimage/

.PHONY: image-layout
image-layout: ## print the Containerfile's final stage, written from test/cluster/driverimage's declaration
	@sed -n '/^# BEGIN generated/,/^# END generated/p' Containerfile
