# pitstop's build. Everything it needs comes from the Go module proxy or
# Debian's packages; `make test` on a fresh clone builds what is missing.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
BENCH ?= .
BENCHFLAGS ?=
FUZZTIME ?= 1m
# How long each new input is minimized (go test's default, 60s, leaves a slow
# target such as the import little time to fuzz).
FUZZMINIMIZETIME ?= 5s
CONTROLLER_GEN := $(BIN)/controller-gen
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/pitstop-dev/pitstop/internal/version.Version=$(VERSION) \
           -X github.com/pitstop-dev/pitstop/internal/version.Commit=$(COMMIT)
GO_TEST_FLAGS ?= -race -count=1
# The packages whose tests start local clusters (internal/localcluster),
# `pitstop dev` or several pitstop processes. They run one at a time: on 2
# cores two of them at once starve each other's simulated kubelets (a
# rolling maintenance then stalls on PodDisruptionBudgets that never see
# their pods Ready again). Every other package starts at most one envtest
# API server and runs two at a time.
CLUSTER_PKGS := ./cmd/pitstop ./internal/localcluster ./test/browser
# The tools `make test` runs: the kubelet, kube-proxy and Cluster API's
# manager serve only `make e2e`.
TEST_TOOLS := kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok controller-gen helm
# The tests of `make e2e`: every Test function in a _test.go file built
# only with the e2e tag (`//go:build e2e`), package by package.
E2E_FILES = $(shell grep -rl --include='*_test.go' --exclude-dir=bin --exclude-dir=dist '^//go:build e2e' . | sort)

.PHONY: help
help: ## Show the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## Install the system packages the tests need (gcc for -race, prometheus for the health-gate check, chromium for the dashboard's browser test), if missing.
	@hack/ensure-deps.sh

.PHONY: tools
tools: deps ## Build every pinned tool into bin/: the control plane, kubelet, kwok, controller-gen, helm, Cluster API's manager (cold: 10-18 minutes on 2 cores).
	@hack/build-tools.sh

.PHONY: test-tools
test-tools: deps ## Build the pinned tools `make test` needs into bin/ (all but the kubelet, kube-proxy and Cluster API's manager).
	@hack/build-tools.sh $(TEST_TOOLS)

.PHONY: build
build: ## Build bin/pitstop, and bin/kubectl-pitstop: the same binary as the plugin of `kubectl pitstop`.
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/pitstop ./cmd/pitstop
	ln -f $(BIN)/pitstop $(BIN)/kubectl-pitstop

.PHONY: crosscheck
crosscheck: ## Compile pitstop and vet its packages for Windows (amd64), the platform furthest from Linux: what `make cross` would catch, for one platform.
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 go vet ./cmd/... ./internal/... ./api/...

.PHONY: cross
cross: ## Build dist/pitstop-<os>-<arch> and dist/kubectl-pitstop-<os>-<arch> for Linux, macOS and Windows on amd64 and arm64.
	@mkdir -p dist
	for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do \
	  os=$${platform%/*} arch=$${platform#*/} ext=; \
	  if [ $$os = windows ]; then ext=.exe; fi; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$(LDFLAGS) -s -w" -o dist/pitstop-$$os-$$arch$$ext ./cmd/pitstop; \
	  ln -f dist/pitstop-$$os-$$arch$$ext dist/kubectl-pitstop-$$os-$$arch$$ext; \
	done

.PHONY: image
image: IMAGE_REPO ?= ghcr.io/pitstop-dev/pitstop
image: IMAGE_TAG ?= $(VERSION)
image: ## Build dist/pitstop-image.tar, the linux/amd64+arm64 image as an OCI layout archive (IMAGE_REPO, IMAGE_TAG name it; the same commit gives the same digest).
	@mkdir -p dist
	for arch in amd64 arm64; do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch go build -trimpath -buildvcs=false \
	    -ldflags "$(LDFLAGS) -s -w -buildid=" -o dist/linux-$$arch/pitstop ./cmd/pitstop; \
	done
	go run ./hack/image -out dist/pitstop-image.tar \
	  -binary linux/amd64=dist/linux-amd64/pitstop -binary linux/arm64=dist/linux-arm64/pitstop \
	  -repo '$(IMAGE_REPO)' -tag '$(IMAGE_TAG)' -version '$(VERSION)' -revision '$(COMMIT)' \
	  -created "$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)}"

.PHONY: manifests
manifests: ## Regenerate CRDs, RBAC and deep-copy code from api/ and the kubebuilder markers.
	@hack/build-tools.sh controller-gen
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@hack/rbac.sh
	@hack/machineapi-crds.sh
	@hack/capi-crds.sh
	@hack/chart-crds.sh

.PHONY: verify
verify: ## Fail if generated files, formatting or go.mod are stale.
	@hack/verify.sh

.PHONY: vet
vet: ## Run go vet, on the e2e and fault tests too (so that they compile where make test does not run them).
	go vet -tags e2e,fault ./...

.PHONY: test
test: test-tools verify vet crosscheck ## What CI runs: tools, generated-file check, vet, a Windows compile, every test but e2e and fault with -race, then the fault campaign's ci form (make fault-ci).
	go test $(GO_TEST_FLAGS) -timeout 20m -p 2 $$(go list ./... | grep -v -x -F $(foreach p,$(CLUSTER_PKGS),-e github.com/pitstop-dev/pitstop/$(p:./%=%)))
	go test $(GO_TEST_FLAGS) -timeout 20m -p 1 $(CLUSTER_PKGS)
	@$(MAKE) --no-print-directory fault-ci

.PHONY: e2e
e2e: tools build ## The end-to-end scenarios on the local cluster (files tagged e2e: test/e2e, the demos, the real node, the image under podman), one package at a time, with -race.
	@set -e; for dir in $$(dirname $(E2E_FILES) | sort -u); do \
	  tests=$$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing.T).*/\1/p' $$(grep -l '^//go:build e2e' $$dir/*_test.go) | paste -sd '|'); \
	  echo "go test -tags e2e -run '^($$tests)$$' $$dir"; \
	  go test -tags e2e $(GO_TEST_FLAGS) -timeout 30m -p 1 -run "^($$tests)\$$" $$dir; \
	done

.PHONY: demo
demo: tools build ## Start a 20-node local cluster with sample workloads and run pitstop against it.
	@exec $(BIN)/pitstop dev

.PHONY: bench
bench: tools build ## Run the benchmarks in test/bench (slow; prints the figures in docs/benchmarks.md). BENCH=regexp picks some, BENCHFLAGS passes flags.
	go test -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 120m -v ./test/bench/... -args $(BENCHFLAGS)

.PHONY: fault
fault: FAULTFLAGS ?= -form=long
fault: test-tools ## Run the fault-injection campaign in test/fault (the API server stopped, etcd killed, leader kills, a partition, slow requests, clocks ahead and behind, strikes mid-eviction, control-plane quorum, zone budgets racing, cordons and a co-actor, surges, an upgrade mid-drain): the long form, FAULTFLAGS=-form=short the short one, FAULTFLAGS=-form=brief the brief one (docs/safety.md).
	go test -tags fault -count=1 -timeout 150m -v ./test/fault/ -args $(FAULTFLAGS)

# The fault campaign's strikes that make test runs (docs/safety.md).
FAULT_CI := MidEviction|SomeoneElsesCordon|CoActorUncordons|ZoneBudgetsRace|ControlPlaneQuorumUnderPartition|SkewedSlotClocks|SurgeWorldChanges|UpgradeMidDrain

.PHONY: fault-ci
fault-ci: test-tools ## Run the fault campaign's ci form, part of make test: the leader killed, etcd killed and the API server stopped mid-eviction, someone else's cordon, a co-actor uncordoning, two zone budgets racing, control-plane quorum under a partition, budget slots under skewed clocks, the world changing under a surge, an upgrade mid-drain; with the webhook on and PodDisruptionBudgets at their tightest.
	go test -tags fault -count=1 -timeout 30m ./test/fault/ -run '^TestFault($(FAULT_CI))$$' -args -form=ci

.PHONY: fuzz
fuzz: tools ## Run every fuzz target (each func Fuzz... in a _test.go file) for FUZZTIME (default 1m), one after the other; a failing input is written to the package's testdata/fuzz.
	@grep -rl --include='*_test.go' --exclude-dir=bin --exclude-dir=dist '^func Fuzz' . | sort | while read -r file; do \
	  for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
	    echo "$$target ($$(dirname "$$file"))"; \
	    go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) "$$(dirname "$$file")"; \
	  done; \
	done

.PHONY: release
release: ## Write dist/pitstop.yaml, the one-file install (kubectl apply --server-side -f), rendered from charts/pitstop with its default values, and dist/pitstop-medik8s.yaml, the same with medik8sCompat.enabled (builds bin/helm if missing).
	@hack/build-tools.sh helm
	@hack/release.sh

.PHONY: clean
clean: ## Remove bin/ (the next `make tools` is a cold build).
	rm -rf $(BIN)
