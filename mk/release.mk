# The release (docs/release.md). VERSION (the Makefile: a tag vX.Y.Z on HEAD, else the
# VERSION file) is the one source of the version; these targets check that everything
# that carries it agrees and read the release notes from CHANGELOG.md.
RELEASE_TOOL := $(GO) run ./hack/release
RELEASE_DIR := _output/release
RELEASE_NOTES := $(RELEASE_DIR)/notes-$(RELEASE_TAG).md

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
