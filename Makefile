# rdma-dra-driver. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
# The version, X.Y.Z without a v: a tag vX.Y.Z on HEAD, else the VERSION file (VERSION=
# overrides both; a leading v is dropped). It is the one source of the image tag
# v$(VERSION), the chart's version and appVersion, the static manifests' image and the
# release's CHANGELOG section; make release-check proves they agree (docs/release.md).
VERSION ?= $(shell git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null || cat VERSION)
override VERSION := $(patsubst v%,%,$(strip $(VERSION)))
RELEASE_TAG := v$(VERSION)
GIT_COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# ldflags stamps a version ($(1)) and a commit ($(2)) into the binaries; `make build` and
# the image's binaries carry the release tag, the commit tells builds of it apart.
ldflags = -s -w -X github.com/rdma-dra/rdma-dra-driver/internal/version.Version=$(1) \
	-X github.com/rdma-dra/rdma-dra-driver/internal/version.GitCommit=$(2)
LDFLAGS := $(call ldflags,$(RELEASE_TAG),$(GIT_COMMIT))
BIN_DIR := _output/bin
BINARIES := rdma-dra rdma-dra-kubeletplugin rdma-dra-controller rdma-dra-cdi-hook
FUZZTIME ?= 10s

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z][a-zA-Z0-9_-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## build the binaries into _output/bin, one line per binary as it starts
	@mkdir -p $(BIN_DIR)
	@for b in $(BINARIES); do \
	  if [ -d cmd/$$b ]; then \
	    echo "build $$b $(RELEASE_TAG) -> $(BIN_DIR)/$$b"; \
	    $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/$$b ./cmd/$$b || exit 1; \
	  fi; \
	done

.PHONY: test
test: ## unit tests of the driver (and its failpoint, built with -tags failpoint); in test/: the API server's validation of our slices, unit tests of the cluster, bench, scale and kernel-VM tools and their plotting helper and of the demo's kind config; in test/e2e: the e2e framework's
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -tags failpoint -run Failpoint ./pkg/plugin/
	cd test && $(GO) test -count=1 ./validation/... ./cluster/... ./internal/... ./bench/... ./scale/... ./kernel/... ./demo/...
	cd test/e2e && $(GO) test -count=1 ./framework/...

.PHONY: test-race
test-race: ## unit tests of the driver under the race detector (the plugin, checkpoint and health packages are lock-heavy)
	$(GO) test -race -count=1 ./...

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 10s)
	hack/fuzz.sh $(FUZZTIME)

.PHONY: bench
bench: bench-report ## the performance report: docs/benchmarks.md and _output/bench/results.json (BENCH_SMOKE=1: a quick check of the harness)

.PHONY: bench-micro
bench-micro: ## Go micro-benchmarks of discovery, the device model, CDI specs, prepare and the controller at 1,000 nodes
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

# The linters are pinned in hack/tools/go.mod, a module of their own so that the driver's
# go.mod does not carry them. `go tool` builds them from the module proxy the first time
# (a few minutes) and reuses the cached binaries after that.
TOOLS_MODFILE := $(CURDIR)/hack/tools/go.mod
GOLANGCI_LINT := $(GO) tool -modfile=$(TOOLS_MODFILE) golangci-lint
LOGCHECK := $(GO) tool -modfile=$(TOOLS_MODFILE) logcheck
# actionlint has a module of its own (hack/tools/actionlint/go.mod says why). It runs
# without shellcheck and pyflakes, so that it finds the same on every machine.
ACTIONLINT := $(GO) tool -modfile=$(CURDIR)/hack/tools/actionlint/go.mod actionlint -shellcheck= -pyflakes=

.PHONY: lint
lint: ## go vet, golangci-lint (.golangci.yml) and a gofmt check of the three modules, the driver, test/ and test/e2e (with the build tags of the failpoint, the real-kernel tier and scheduler_perf); logcheck of the driver's contextual logging; actionlint of .github/workflows
	$(GO) vet ./...
	$(GO) vet -tags failpoint ./pkg/plugin/ ./cmd/rdma-dra-kubeletplugin/
	cd test && $(GO) vet ./... && $(GO) vet -tags e2ekernel ./kernel && $(GO) vet -tags kernelvm ./kernel/invm && $(GO) vet -tags schedperf ./scale/schedperf
	cd test/e2e && $(GO) vet ./...
	$(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...
	cd test && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...
	cd test/e2e && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...
	$(LOGCHECK) -check-contextual -check-logger-constructor -check-value ./...
	$(ACTIONLINT)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: fmt
fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

.PHONY: clean
clean: ## remove build output (not the local cluster's cache)
	rm -rf $(BIN_DIR)

# Further targets live in mk/*.mk, one file per concern (local cluster, images, e2e, bench).
-include mk/*.mk
