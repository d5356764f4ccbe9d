# Operator suite. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
BIN := $(ROOT)/.cache/bin
export PATH := $(BIN):$(PATH)
export GOFLAGS ?= -buildvcs=false
export HELM_CACHE_HOME := $(ROOT)/.cache/helm/cache
export HELM_CONFIG_HOME := $(ROOT)/.cache/helm/config
export HELM_DATA_HOME := $(ROOT)/.cache/helm/data

SERVICES := vald-operator veltrix-operator valkey-operator memgraph-operator node-agent
# Test parts, never shipped (no image, no chart): the local cluster runs them for the
# products' images, and the operators' integration tests start them as processes.
SIMULATORS := memgraph-sim veltrix-sim vald-helm-sim
# Host-side clients for looking at the local cluster's pods (README recipes).
CLIENTS := bolt-query
OPERATORS := vald-operator veltrix-operator valkey-operator memgraph-operator
MODULES := api proto shared tools $(addprefix services/,$(SERVICES)) tools/e2e
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The e2e suite takes about 19 min on 2 cores beside the unit tests (fresh-clone CI,
# 2026-12-04); each scenario stops a minute before this deadline.
TEST_TIMEOUT ?= 40m
# Where make test keeps each run's whole output (one directory per run).
TEST_OUTPUT ?= /tmp/opsuite-test-output
FUZZ_TIME ?= 30s
# make chaos: how long faults are injected, and their seed (random when empty; printed).
CHAOS_DURATION ?= 10m
CHAOS_SEED ?=

# Tools pinned by tool directives in tools/go.mod (golangci-lint in tools/lint/go.mod),
# built once into .cache/bin. The tests need only the runtime tools.
RUNTIME_TOOL_PKGS := \
	helm.sh/helm/v3/cmd/helm \
	github.com/fullstorydev/grpcurl/cmd/grpcurl \
	sigs.k8s.io/kwok/cmd/kwok
DEV_TOOL_PKGS := \
	sigs.k8s.io/controller-tools/cmd/controller-gen \
	github.com/bufbuild/buf/cmd/buf \
	google.golang.org/protobuf/cmd/protoc-gen-go \
	google.golang.org/grpc/cmd/protoc-gen-go-grpc

include tools/local/Makefile.inc

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# The control plane's version (tools/build-controlplane.sh builds it); charts are linted for it.
K8S_VERSION := $(shell sed -n 's/^k8s_version=//p' tools/build-controlplane.sh)

# Without these, helm assumes Kubernetes v1.20 and `helm template` fails the charts' kubeVersion.
K8S_MAJOR := $(word 1,$(subst ., ,$(K8S_VERSION:v%=%)))
K8S_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION:v%=%)))
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v3" {print $$2; exit}' tools/go.mod)
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$(K8S_MAJOR) -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(K8S_MINOR) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$(K8S_MAJOR) -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(K8S_MINOR)

$(BIN)/.runtime-stamp: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && GOWORK=off go build -ldflags "$(HELM_LDFLAGS)" -o $(BIN)/ $(RUNTIME_TOOL_PKGS)
	@touch $@

# redis_exporter, the Valkey operator's default exporter sidecar image
# (ghcr.io/oliver006/redis_exporter), pinned by a tool directive in tools/go.mod: the local
# cluster's process runner runs it for that image (tools/internal/podrunner), so a
# ValkeyCluster with spec.exporter.enabled serves the exporter's real series. It adds about
# 20 s of CPU to a cold run (its own packages; 80 s with an empty Go build cache,
# 2026-12-05); `make up` and every test target build it.
REDIS_EXPORTER_VERSION := $(shell awk '$$1 == "github.com/oliver006/redis_exporter" && $$2 ~ /^v/ {print $$2; exit}' tools/go.mod)

$(BIN)/redis_exporter: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && GOWORK=off go build -trimpath -ldflags "-s -w -X main.BuildVersion=$(REDIS_EXPORTER_VERSION)" -o $@ github.com/oliver006/redis_exporter

$(BIN)/.dev-stamp: tools/go.mod tools/go.sum tools/lint/go.mod tools/lint/go.sum
	@mkdir -p $(BIN)
	cd tools && GOWORK=off go build -o $(BIN)/ $(DEV_TOOL_PKGS)
	cd tools/lint && GOWORK=off go build -o $(BIN)/ github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@touch $@

.PHONY: tools runtime-tools
runtime-tools: $(BIN)/.runtime-stamp $(BIN)/redis_exporter ## Build the tools tests and the demo run (helm, grpcurl, kwok, redis_exporter).
tools: runtime-tools $(BIN)/.dev-stamp ## Build every pinned tool (also controller-gen, buf, golangci-lint).

# versitygw (posix backend), the S3 server the backup tests start and the local cluster
# runs, pinned in tools/objectstore/go.mod (a module outside go.work, like tools/k8s) and
# built once into .cache/bin (about 3 minutes of CPU cold); a changed pin rebuilds it.
OBJECTSTORE_VERSION := $(shell awk '$$1 == "github.com/versity/versitygw" {print $$2; exit}' tools/objectstore/go.mod)

$(BIN)/versitygw: tools/objectstore/go.mod tools/objectstore/go.sum
	@mkdir -p $(BIN)
	cd tools/objectstore && GOWORK=off go build -trimpath -ldflags "-s -w -X main.Version=$(OBJECTSTORE_VERSION)" -o $@ github.com/versity/versitygw/cmd/versitygw

.PHONY: objectstore
objectstore: $(BIN)/versitygw ## Build the S3 server (versitygw) the backup tests and the local cluster run, once.

# Prometheus, the server the e2e suite's TestMonitoring runs against the local cluster (it
# scrapes the operators and node agents and evaluates the charts' dashboards and alerts),
# pinned in tools/prometheus/go.mod (outside go.work) and built once into .cache/bin: tag
# remove_all_sd (static targets only, which the test writes), no builtinassets (no web UI,
# the HTTP API only). About 6 minutes of CPU cold (2026-12-05); a changed pin rebuilds it.
PROMETHEUS_VERSION := $(shell awk '$$1 == "github.com/prometheus/prometheus" {print $$2; exit}' tools/prometheus/go.mod)

$(BIN)/prometheus: tools/prometheus/go.mod tools/prometheus/go.sum
	@mkdir -p $(BIN)
	cd tools/prometheus && GOWORK=off go build -trimpath -tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=$(PROMETHEUS_VERSION)" -o $@ github.com/prometheus/prometheus/cmd/prometheus

.PHONY: prometheus
prometheus: $(BIN)/prometheus ## Build the Prometheus server TestMonitoring (e2e) runs, once.

# `make up` builds it too: the local cluster runs it as its object store (the Deployment
# objectstore/objectstore); tools/local/Makefile.inc defines up. And the exporter, which
# it runs for a ValkeyCluster's exporter sidecar.
up: objectstore $(BIN)/redis_exporter

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl once into .cache/k8s.
	tools/build-controlplane.sh

.PHONY: build
build: ## Build the five static binaries, the simulators (tools/cmd/*-sim) and bolt-query into bin/.
	@mkdir -p bin
	for s in $(SERVICES); do (cd services/$$s && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(ROOT)/bin/$$s ./cmd); done
	for s in $(SIMULATORS) $(CLIENTS); do (cd tools && CGO_ENABLED=0 go build -trimpath -o $(ROOT)/bin/$$s ./cmd/$$s); done

.PHONY: generate
generate: tools ## Regenerate deepcopy, CRDs, RBAC, protobuf code, the charts' dashboards and chart copies.
	controller-gen object:headerFile="" paths=./api/...
	controller-gen crd paths=./api/... output:crd:dir=./deploy/crds
	for s in $(OPERATORS); do controller-gen rbac:roleName=$$s paths=./services/$$s/... output:rbac:dir=./deploy/rbac/$$s; done
	buf generate
	cd tools && go run ./cmd/dashboards -charts ../charts
	if [ -x charts/sync.sh ]; then charts/sync.sh; fi

.PHONY: check-generated
check-generated: generate ## Fail when generated files are stale.
	@if [ -n "$$(git status --porcelain -- api deploy proto charts)" ]; then \
		git status --porcelain -- api deploy proto charts; \
		echo "generated files are stale: run 'make generate' and commit the result"; exit 1; fi

.PHONY: lint
lint: tools check-generated ## golangci-lint in every module, buf lint/format/breaking, helm lint.
	for m in $(MODULES); do echo "golangci-lint $$m"; (cd $$m && golangci-lint run ./...); done
	buf lint
	buf format --diff --exit-code
	if git rev-parse -q --verify main >/dev/null; then buf breaking --against '.git#branch=main'; fi
	charts/sync.sh --check
	for c in charts/*/; do helm lint --strict --kube-version $(K8S_VERSION) $$c; done

.PHONY: images
images: build ## One OCI image per service in dist/images (layout and tarball), tagged with the chart's appVersion.
	cd tools && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) GOWORK=off go run ./cmd/images -revision $$(git rev-parse HEAD)

# shared/testenv/netfault.go's DropComment.
PARTITION_COMMENT := opsuite-e2e-partition

.PHONY: sweep
sweep: ## Kill control-plane processes orphaned by killed test runs; remove the leftover iptables rules of tests (shared/testenv DropOutput).
	cd shared && go run ./testenv/cmd/sweep
	@# grep finds nothing on a clean machine (exit 1, which pipefail would make the target's).
	@if command -v iptables >/dev/null; then iptables -S OUTPUT | { grep -e '--comment $(PARTITION_COMMENT)' || true; } | sed 's/^-A /-D /' | while read -r rule; do iptables $$rule; done; fi

# Every module's packages but the e2e suite's, as one `go test` over the workspace: one
# module's test builds and runs overlap another's (a loop per module waited for each
# module's slowest package with a core idle).
UNIT_PKGS := $(foreach m,$(filter-out tools/e2e,$(MODULES)),./$(m)/...)

.PHONY: test
test: controlplane runtime-tools objectstore prometheus build sweep ## Unit, integration and end-to-end tests of every module (builds the control plane on first use).
	@# The e2e suite spends most of its time waiting on its cluster (about 15% of two
	@# cores): it runs as two shards, each on its own local cluster (tools/e2e/shard_test.go),
	@# beside the unit and integration tests, not after them. Without -v, go test prints each
	@# package's output whole when it ends, so the three do not mix.
	@# Each part's whole output is also kept in a file (TEST_OUTPUT): a CI log that shows
	@# only part of it still leaves every failed test's messages on the machine.
	out=$(TEST_OUTPUT)/$$(date -u +%Y%m%dT%H%M%S); mkdir -p $$out; echo "test: whole output in $$out"; \
	(cd tools/e2e && E2E_SHARD=valkey go test -count=1 -timeout $(TEST_TIMEOUT) . > $$out/e2e-valkey.txt 2>&1; rc=$$?; cat $$out/e2e-valkey.txt; exit $$rc) & e2e1=$$!; \
	(cd tools/e2e && E2E_SHARD=others go test -count=1 -timeout $(TEST_TIMEOUT) . > $$out/e2e-others.txt 2>&1; rc=$$?; cat $$out/e2e-others.txt; exit $$rc) & e2e2=$$!; \
	failed=""; go test -count=1 -timeout $(TEST_TIMEOUT) $(UNIT_PKGS) 2>&1 | tee $$out/unit.txt; [ $${PIPESTATUS[0]} -eq 0 ] || failed=" unit/integration"; \
	wait $$e2e1 || failed="$$failed e2e(valkey)"; \
	wait $$e2e2 || failed="$$failed e2e(others)"; \
	if [ -n "$$failed" ]; then echo "FAILED:$$failed (whole output in $$out)"; exit 1; fi

# The Valkey tests run valkey-server (Valkey 8.0 from bookworm-backports) unless
# VALKEY_SERVER=redis-server picks Debian's Redis 7.0; this target is that compatibility
# run for what depends on the server most: the executor package (real clusters formed,
# rebalanced, failed over) and the end-to-end Valkey scenario on redis images.
.PHONY: test-redis7
test-redis7: controlplane runtime-tools objectstore build sweep ## Compatibility run on Redis 7.0 (VALKEY_SERVER=redis-server): the Valkey executor package and the e2e Valkey scenario.
	(cd tools/e2e && VALKEY_SERVER=redis-server go test -count=1 -timeout $(TEST_TIMEOUT) -run 'TestInstall$$|TestValkeyScenario$$' .) & e2e=$$!; \
	failed=""; (cd services/valkey-operator && VALKEY_SERVER=redis-server go test -count=1 -timeout $(TEST_TIMEOUT) ./internal/executor/) || failed=" executor"; \
	wait $$e2e || failed="$$failed e2e"; \
	if [ -n "$$failed" ]; then echo "FAILED on redis-server:$$failed"; exit 1; fi

# Each fuzz target as <module>:<package>:<target>; `make fuzz` runs them one at a time (a
# target's workers take every core), FUZZ_TIME each. `go test` runs their seed corpora
# (testdata/fuzz/<target>/ and the f.Add seeds), so make test does too.
FUZZ_TARGETS := \
	services/valkey-operator:./internal/planner:FuzzSimulation \
	services/valkey-operator:./internal/planner:FuzzCompute \
	services/valkey-operator:./internal/planner:FuzzComputeFromNodes \
	services/memgraph-operator:./internal/planner:FuzzPlan \
	services/memgraph-operator:./internal/planner:FuzzChaos \
	services/veltrix-operator:./internal/planner:FuzzPlan \
	services/veltrix-operator:./internal/planner:FuzzPasses \
	services/veltrix-operator:./internal/planner:FuzzPlanLost \
	services/vald-operator:./internal/resources:FuzzDesiredValdReleases \
	services/node-agent:./internal/server:FuzzValidatePrepare \
	tools:./internal/bolt:FuzzUnpack \
	tools:./internal/bolt:FuzzSession \
	shared:./backupschedule:FuzzSchedule \
	shared:./backupschedule:FuzzPrune

.PHONY: fuzz
fuzz: ## Fuzz every planner, builder and parser target for FUZZ_TIME each (30s by default), one at a time.
	for t in $(FUZZ_TARGETS); do \
		IFS=: read -r mod pkg name <<< "$$t"; \
		echo "== $$mod $$pkg $$name"; \
		(cd $$mod && go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZ_TIME) $$pkg) || exit 1; \
	done

.PHONY: chaos
chaos: controlplane runtime-tools objectstore build sweep ## Chaos run on the local cluster for CHAOS_DURATION (10m), CHAOS_SEED=<n> replays one; make test runs 45s of it.
	@# The test's own waits are bounded; the timeout only has to outlast CHAOS_DURATION.
	cd tools/e2e && CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_SEED=$(CHAOS_SEED) go test -count=1 -v -timeout 3h -run 'TestInstall$$|TestChaos$$' .

.PHONY: test-e2e
test-e2e: controlplane runtime-tools objectstore build ## End-to-end: local cluster, every chart by Helm, upgrades, leader election, uninstall (E2E_KUBECONFIG targets another cluster).
	cd tools/e2e && go test -count=1 -v -timeout $(TEST_TIMEOUT) ./...

.PHONY: bench
bench: controlplane runtime-tools objectstore build ## Benchmarks (speed and memory targets), then VeltrixDB's time to Ready on a 10-node local cluster.
	for m in $(filter-out tools/e2e,$(MODULES)); do (cd $$m && go test -run '^$$' -bench . -benchmem ./...); done
	cd tools/e2e && E2E_GENERAL_NODES=8 go test -count=1 -run 'TestInstall$$' -bench VeltrixTimeToReady -benchtime 1x -timeout 30m .

.PHONY: demo
demo: controlplane runtime-tools objectstore build up ## Start the local cluster, install every chart, apply the samples, watch them (Ctrl-C stops).
	cd tools && GOWORK=off go build -o $(ROOT)/.cache/bin/demo ./cmd/demo && $(ROOT)/.cache/bin/demo --repo $(ROOT) $(DEMO_FLAGS)
