# provfleet: run a fleet of Kubernetes external volume provisioners in one process.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

OUTPUT        ?= $(CURDIR)/_output
CONTROLPLANE  ?= $(OUTPUT)/controlplane
GO_TEST_FLAGS ?=
export PROVFLEET_CONTROLPLANE_BIN := $(CONTROLPLANE)

# A test's timeout times the test, not the compiler: on a machine loaded by
# other work, compiling can take longer than the tests. So every target that
# times tests first builds, untimed, what they would compile: their test
# binaries (TEST_BUILD: `go test -exec true` builds them and runs none), and
# the binaries the tests start, which they take ready-made or find up to date.
TEST_BUILD  := go test -exec true -count=1
MANAGER_BIN := $(OUTPUT)/bin/manager

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the manager into _output/bin.
	go build -o $(OUTPUT)/bin/ ./cmd/...

.PHONY: run
run: controlplane ## Start a local control plane and the manager with the examples; Ctrl-C stops everything.
	OUTPUT=$(OUTPUT) hack/run.sh

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager and kubectl (cached).
	hack/controlplane/build.sh $(CONTROLPLANE)

.PHONY: test
test: controlplane fuzz-short bench-smoke image image-test chart-test build chaos-build ## Run unit and end-to-end tests (a short chaos run among them), the benchmark smoke run, the image's build and tests and the chart's tests (builds the control plane first).
	$(TEST_BUILD) -race ./... >/dev/null
	PROVFLEET_MANAGER_BIN=$(MANAGER_BIN) PROVFLEET_CHAOS_MANAGER_BIN=$(CHAOS_BIN) go test -race -count=1 -timeout 40m $(GO_TEST_FLAGS) ./...
	$(TEST_BUILD) -race -tags chaos $(CHAOS_PACKAGES) >/dev/null
	go test -race -count=1 -tags chaos -timeout 10m $(CHAOS_PACKAGES)
	$(MAKE) big-trees

# Chaos runs: the manager built with the build tag chaos carries the
# store's fault layer (no release build does), and without -race, which
# would slow every process tenfold. The short form, TestChaos, runs in
# make test; make chaos runs the long one.
CHAOS_BIN   := $(OUTPUT)/chaos/manager
CHAOS_FLAGS ?=
# The packages whose code differs under the build tag chaos.
CHAOS_PACKAGES := ./pkg/backend/internal/dirvol/ ./internal/chaoshistory/

.PHONY: chaos-build
chaos-build:
	go build -tags chaos -o $(CHAOS_BIN) ./cmd/manager

.PHONY: chaos
chaos: controlplane chaos-build ## Run provfleet under API, store, NFS, kill and partition faults and check it (CHAOS_FLAGS='-duration=10m -seed=1'); results in test/chaos/results.
	go run ./test/chaos/cmd/chaos -manager=$(CHAOS_BIN) $(CHAOS_FLAGS)

# The removal and copy tests build trees a tenth of their size under the
# race detector, which slows every NFS round trip tenfold: this runs them at
# full size without it.
.PHONY: big-trees
big-trees: ## Run the removal and copy tests of big trees (100,000 files, 20,000 levels; copies 2,048 deep) at full size, without the race detector.
	$(TEST_BUILD) ./pkg/backend/internal/dirvol/ ./pkg/backend/internal/nfsfs/ >/dev/null
	go test -count=1 -timeout 30m -run 'RemoveAllBounded|CopyTreeBounded' ./pkg/backend/internal/dirvol/ ./pkg/backend/internal/nfsfs/

# The image: the manager for each of IMAGE_ARCHS (GOARCHes of linux; several
# make an OCI image index), tagged IMAGE_REPOSITORY:VERSION, dated
# SOURCE_DATE_EPOCH (the last commit's time) so that a rebuild gives the same
# digests. VERSION is the chart's appVersion, the tag the chart installs by
# default, so that the chart runs the image built from the same tree
# (the chart's tests check that the chart and this default agree, and make
# generate renders the chart into examples/deploy).
# The tool is a module of its own (hack/image/go.mod) that pins
# go-containerregistry, so the manager's go.mod stays lean.
IMAGE_ARCHS       ?= $(shell go env GOARCH)
IMAGE_REPOSITORY  ?= provfleet/manager
VERSION           ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' charts/provfleet/Chart.yaml)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH

.PHONY: image
image: ## Build the manager's OCI image without Docker into _output/image (IMAGE_ARCHS=amd64,arm64 for an index of both).
	cd hack/image && go run ./cmd/build -repo $(CURDIR) -out $(OUTPUT)/image \
		-archs $(IMAGE_ARCHS) -repository $(IMAGE_REPOSITORY) -version $(VERSION)

.PHONY: image-test
image-test: image-test-build ## Build the image for amd64, arm64 and this machine into a temporary folder and test it, and the Dockerfile against it.
	cd hack/image && go test -race -count=1 -timeout 40m $(GO_TEST_FLAGS) ./...

# The image's tests build the manager for these GOARCHes, and build it again
# to check that a rebuild is identical: compiled here first with their flags
# (hack/image's goBuild), it is only linked within their timeout.
IMAGE_TEST_ARCHS := $(sort amd64 arm64 $(shell go env GOARCH))

.PHONY: image-test-build
image-test-build:
	cd hack/image && $(TEST_BUILD) -race ./... >/dev/null
	@set -e; for arch in $(IMAGE_TEST_ARCHS); do \
		echo "building cmd/manager for linux/$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch go build -trimpath -ldflags='-s -w' -o $(OUTPUT)/image-test/manager-linux-$$arch ./cmd/manager; \
	done

# The Helm chart (charts/provfleet): its tests lint and render it with helm's
# Go packages, pinned in charts/charttest/go.mod, a module of its own beside
# the chart, so the manager's go.mod stays lean; no helm binary is needed.
.PHONY: chart-test
chart-test: controlplane build ## Lint and render the Helm chart, check it against examples/ and install it on a local control plane.
	cd charts/charttest && $(TEST_BUILD) -race ./... >/dev/null
	cd charts/charttest && PROVFLEET_MANAGER_BIN=$(MANAGER_BIN) go test -race -count=1 -timeout 20m $(GO_TEST_FLAGS) ./...

FUZZ_TIME ?= 3000x
FUZZ_TARGETS := FuzzHostPath:./pkg/backend/hostpath FuzzNFS:./pkg/backend/nfs FuzzOverlapping:./pkg/backend FuzzNFSStore:./pkg/backend/internal/nfsfs FuzzReplies:./pkg/backend/internal/nfsclient

.PHONY: fuzz-short
fuzz-short: ## Run each fuzz target for FUZZ_TIME executions (a count: a duration races the fuzz engine's own deadline, golang/go#75804).
	@set -e; for t in $(FUZZ_TARGETS); do \
		go test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZ_TIME) "$${t#*:}"; \
	done

.PHONY: bench
bench: controlplane ## Run the benchmark (a fresh control plane; tens of minutes); results in bench/results. BENCH_FLAGS=-scenarios=3 picks some.
	cd bench && go run ./cmd/bench $(BENCH_FLAGS)

.PHONY: bench-smoke
bench-smoke: controlplane bench-smoke-build ## Run the benchmark harness's tests and every scenario at toy size.
	cd bench && go test -race -count=1 -timeout 10m $(GO_TEST_FLAGS) ./...

# The smoke run builds the manager (with the profiling endpoint, through an
# overlay), the peer and the limit into BENCH_SMOKE_BIN as the harness's
# build does; built here first with the same flags, overlay and folder, they
# are up to date when it looks.
BENCH_SMOKE_BIN := $(CURDIR)/_output/bench-smoke/bin

.PHONY: bench-smoke-build
bench-smoke-build:
	cd bench && $(TEST_BUILD) -race ./... >/dev/null
	mkdir -p $(BENCH_SMOKE_BIN)
	cp bench/internal/harness/assets/pprof.go.txt $(BENCH_SMOKE_BIN)/pprof.go
	printf '{"Replace":{"%s":"%s"}}' $(CURDIR)/cmd/manager/zz_bench_pprof.go $(BENCH_SMOKE_BIN)/pprof.go >$(BENCH_SMOKE_BIN)/overlay.json
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -overlay=$(BENCH_SMOKE_BIN)/overlay.json -o $(BENCH_SMOKE_BIN)/manager ./cmd/manager
	cd bench && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $(BENCH_SMOKE_BIN)/ ./cmd/upstream ./cmd/limit

.PHONY: unit
unit: ## Run the unit tests only (end-to-end tests skip themselves under -short).
	go test -race -count=1 -short $(GO_TEST_FLAGS) ./...

.PHONY: e2e
e2e: controlplane build ## Run the end-to-end tests and those of the test control plane only, verbose.
	$(TEST_BUILD) -race ./internal/testenv/... ./test/e2e/... >/dev/null
	PROVFLEET_MANAGER_BIN=$(MANAGER_BIN) go test -race -count=1 -timeout 40m -v $(GO_TEST_FLAGS) ./internal/testenv/... ./test/e2e/...

TOOLS_BIN     := $(OUTPUT)/tools
GOLANGCI_LINT := $(TOOLS_BIN)/golangci-lint
LOGCHECK      := $(TOOLS_BIN)/logcheck

# The linters are pinned in hack/tools/go.mod, a module of their own, so the
# manager's go.mod stays lean; they are rebuilt when that file changes.
$(GOLANGCI_LINT) $(LOGCHECK) &: hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $(TOOLS_BIN)/ github.com/golangci/golangci-lint/v2/cmd/golangci-lint sigs.k8s.io/logtools/logcheck

.PHONY: lint
lint: $(GOLANGCI_LINT) $(LOGCHECK) ## Run golangci-lint (.golangci.yml) over the manager, the benchmark, the image and chart tools, and logcheck's contextual-logging rules.
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...
	$(GOLANGCI_LINT) run --allow-parallel-runners --build-tags chaos $(CHAOS_PACKAGES)
	cd bench && $(GOLANGCI_LINT) run --allow-parallel-runners --config ../.golangci.yml ./...
	cd hack/image && $(GOLANGCI_LINT) run --allow-parallel-runners --config ../../.golangci.yml ./...
	cd charts/charttest && $(GOLANGCI_LINT) run --allow-parallel-runners --config ../../.golangci.yml ./...
	$(LOGCHECK) -check-contextual -check-value ./...

.PHONY: generate
generate: ## Regenerate deepcopy, CRDs, typed clients and docs/api.md from api/, the chart's copies of the CRD and examples/monitoring, the kustomize base's of the CRD, and examples/deploy from the chart.
	hack/update-codegen.sh
	cd charts/charttest && go run ./cmd/deployexamples -root $(CURDIR)

# What make generate writes, all of it checked in.
GENERATED := api crds charts/provfleet/crds charts/provfleet/files examples/crds examples/deploy pkg/generated docs/api.md

.PHONY: verify
verify: generate lint ## Regenerate and fail on a diff; gofmt, license headers, linters, go vet, tests of generated output.
	@git diff --exit-code -- $(GENERATED) && test -z "$$(git ls-files --others --exclude-standard -- $(GENERATED))" \
		|| { git status --short -- $(GENERATED); echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	hack/verify-boilerplate.sh
	go vet ./...
	go vet -tags chaos $(CHAOS_PACKAGES)
	go test -race -count=1 ./api/... ./hack/apidocs/...
