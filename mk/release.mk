# The release (docs/release.md). VERSION (the Makefile: a tag vX.Y.Z on HEAD, else the
# VERSION file) is the one source of the version; these targets check that everything
# that carries it agrees, package and push the chart as an OCI artifact, write the
# image's SBOMs, sign what was pushed and publish the GitHub release. The release workflow
# (.github/workflows/release.yaml) is these targets in order, after make image push; each
# runs on a workstation too.
RELEASE_TOOL := $(GO) run ./hack/release
RELEASE_DIR := _output/release
RELEASE_NOTES := $(RELEASE_DIR)/notes-$(RELEASE_TAG).md
CHART_OUT := _output/chart
CHART_PACKAGE := $(CHART_OUT)/rdma-dra-driver-$(VERSION).tgz
# The chart goes to $(CHART_REGISTRY)/rdma-dra-driver:$(VERSION), e.g.
# oci://ghcr.io/rdma-dra/charts/rdma-dra-driver.
CHART_REGISTRY ?= oci://$(REGISTRY)/charts
# More flags of helm push, e.g. --plain-http for a registry without TLS.
HELM_PUSH_FLAGS ?=
CHART_DIGEST_FILE := $(CHART_OUT)/pushed-digest
# syft writes the SBOMs and cosign signs, both built from the Go module proxy at these
# versions like helm (manifests.mk); SYFT= or COSIGN= use another binary.
SYFT_VERSION ?= v1.57.1
SYFT ?= $(BIN_DIR)/syft
COSIGN_VERSION ?= v2.6.5
COSIGN ?= $(BIN_DIR)/cosign
# What make sbom scans: the pushed image by default; oci-archive:FILE or
# docker-archive:FILE for an image that was not pushed.
SBOM_SOURCE ?= registry:$(IMAGE)
# The image's repository without its tag, for references by digest.
IMAGE_REPOSITORY_OF = $(patsubst %:$(lastword $(subst :, ,$(1))),%,$(1))
# The GitHub release: gh, with GH_TOKEN (the workflow's token) or gh auth login.
GH ?= gh

$(BIN_DIR)/syft:
	@mkdir -p $(BIN_DIR)
	GOBIN=$(abspath $(BIN_DIR)) $(GO) install github.com/anchore/syft/cmd/syft@$(SYFT_VERSION)

$(BIN_DIR)/cosign:
	@mkdir -p $(BIN_DIR)
	GOBIN=$(abspath $(BIN_DIR)) $(GO) install github.com/sigstore/cosign/v2/cmd/cosign@$(COSIGN_VERSION)

.PHONY: version
version: ## print the version: X.Y.Z of a tag vX.Y.Z on HEAD, else the VERSION file's
	@echo $(VERSION)

.PHONY: set-version
set-version: ## start a release: make set-version VERSION=X.Y.Z writes the VERSION file, the chart's version and the manifests
	$(RELEASE_TOOL) set-chart -version $(VERSION)
	echo $(VERSION) >VERSION
	@$(MAKE) --no-print-directory manifests VERSION=$(VERSION)

.PHONY: release-check
release-check: ## fail unless VERSION (or the tag), the chart's version and appVersion, its default image, deployments/static and a CHANGELOG.md section agree
	$(RELEASE_TOOL) check -version $(VERSION) -repository $(RELEASE_REPOSITORY)

.PHONY: release-notes
release-notes: ## the release notes: CHANGELOG.md's section of VERSION, into $(RELEASE_DIR)/notes-v<version>.md and on the terminal
	@$(RELEASE_TOOL) notes -version $(VERSION) -o $(RELEASE_NOTES)
	@echo "# $(RELEASE_NOTES)"; cat $(RELEASE_NOTES)

.PHONY: chart-package
chart-package: $(HELM_DEP) ## package the chart into _output/chart/rdma-dra-driver-<version>.tgz
	@mkdir -p $(CHART_OUT)
	@rm -f $(CHART_PACKAGE)
	$(HELM) package $(CHART_DIR) --destination $(CHART_OUT)
	@[ -f $(CHART_PACKAGE) ] || { echo "helm wrote no $(CHART_PACKAGE): the chart's version is not $(VERSION); make release-check says what differs" >&2; exit 1; }

.PHONY: chart-push
chart-push: chart-package ## push the packaged chart to $(CHART_REGISTRY) as an OCI artifact (helm registry login first, or a docker login); its digest goes to $(CHART_DIGEST_FILE)
	@set -o pipefail; rm -f $(CHART_DIGEST_FILE); \
	$(HELM) push $(HELM_PUSH_FLAGS) $(CHART_PACKAGE) $(CHART_REGISTRY) 2>&1 | tee $(CHART_OUT)/push.log; \
	sed -n 's/^Digest: *\(sha256:[0-9a-f]\{64\}\)$$/\1/p' $(CHART_OUT)/push.log >$(CHART_DIGEST_FILE); \
	[ -s $(CHART_DIGEST_FILE) ] || { echo "helm push printed no digest (see $(CHART_OUT)/push.log)" >&2; exit 1; }

.PHONY: sbom
sbom: $(filter $(BIN_DIR)/syft,$(SYFT)) ## an SPDX SBOM of the image per platform of PLATFORMS, with syft: $(RELEASE_DIR)/rdma-dra-driver-v<version>-<os>-<arch>.spdx.json (SBOM_SOURCE=, default registry:IMAGE)
	@mkdir -p $(RELEASE_DIR)
	@for p in $(subst $(comma), ,$(PLATFORMS)); do \
	  out=$(RELEASE_DIR)/rdma-dra-driver-$(RELEASE_TAG)-$${p//\//-}.spdx.json; \
	  echo "sbom $(SBOM_SOURCE) $$p -> $$out"; \
	  $(SYFT) scan --quiet --platform $$p --source-name rdma-dra-driver-$${p//\//-} --source-version $(RELEASE_TAG) \
	    -o spdx-json=$$out $(SBOM_SOURCE) || exit 1; \
	done

.PHONY: sign
sign: $(filter $(BIN_DIR)/cosign,$(COSIGN)) ## sign the image make push pushed, by digest, keyless (cosign with the CI's OIDC identity), and attach make sbom's SBOMs as attestations
	@digest=$$(cat $(IMAGE_DIGEST_FILE) 2>/dev/null); \
	[ -n "$$digest" ] || { echo "no digest in $(IMAGE_DIGEST_FILE): make push writes it" >&2; exit 1; }; \
	ref=$(call IMAGE_REPOSITORY_OF,$(IMAGE))@$$digest; \
	sboms=$$(ls $(RELEASE_DIR)/rdma-dra-driver-$(RELEASE_TAG)-*.spdx.json 2>/dev/null); \
	[ -n "$$sboms" ] || { echo "no SBOM in $(RELEASE_DIR): make sbom writes them" >&2; exit 1; }; \
	echo "sign $$ref"; $(COSIGN) sign --yes $$ref || exit 1; \
	for f in $$sboms; do echo "attest $$f"; $(COSIGN) attest --yes --type spdxjson --predicate $$f $$ref || exit 1; done

.PHONY: chart-sign
chart-sign: $(filter $(BIN_DIR)/cosign,$(COSIGN)) ## sign the chart make chart-push pushed, by digest, keyless
	@digest=$$(cat $(CHART_DIGEST_FILE) 2>/dev/null); \
	[ -n "$$digest" ] || { echo "no digest in $(CHART_DIGEST_FILE): make chart-push writes it" >&2; exit 1; }; \
	ref=$(patsubst oci://%,%,$(CHART_REGISTRY))/rdma-dra-driver@$$digest; \
	echo "sign $$ref"; $(COSIGN) sign --yes $$ref

.PHONY: github-release
github-release: release-notes ## create the GitHub release of the tag v<version>: the notes of make release-notes, the chart package and the SBOMs as assets
	@command -v $(GH) >/dev/null || { echo "make github-release needs the GitHub CLI (gh), with GH_TOKEN set or gh auth login" >&2; exit 1; }
	$(GH) release create $(RELEASE_TAG) --verify-tag --title "rdma-dra-driver $(RELEASE_TAG)" --notes-file $(RELEASE_NOTES) \
	  $(CHART_PACKAGE) $(wildcard $(RELEASE_DIR)/rdma-dra-driver-$(RELEASE_TAG)-*.spdx.json)
