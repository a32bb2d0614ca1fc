# meshllm — build, run and test.
#
#   make run     build, then start a peer on stories260K and send it real requests
#   make test    everything CI runs (.ci/run calls exactly this)
#
# Every recipe that compiles llama.cpp first evaluates scripts/engine-env.sh,
# which installs or checks the engine's build dependencies and sets the cgo
# flags (SIMD on by default). Keep one set of flags: changing them, or adding
# -race, recompiles llama.cpp (3-9 minutes on 2 cores).

SHELL      := /bin/bash
GO         ?= go
ENGINE_ENV := eval "$$(scripts/engine-env.sh)"
VERSION    ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X main.version=$(VERSION)
# Packages that do not link llama.cpp: tested with -race.
PURE_PKGS   = $$($(GO) list ./... | grep -v -e '/infer/llama$$' -e '/cmd/meshllm$$' -e '/testnet/faults$$')
# Packages that link llama.cpp: tested without -race (a race build of
# llama.cpp would be a second multi-minute compile and adds nothing: the Go
# side of the engine is exercised under -race through infer's fakes).
ENGINE_PKGS = ./infer/llama ./cmd/meshllm
# Tests that run real `meshllm join` processes (bin/meshllm): one package at
# a time, so their peers do not compete with other tests for the cores.
PROCESS_PKGS = ./testnet/faults
FUZZTIME   ?= 20000x
# The container tests (testnet/faults' partition across containers,
# testnet/compose's five-container mesh; about 2 minutes) run whenever the
# Docker engine answers, and always under CI=true, where a missing Docker
# fails them instead of skipping.
DOCKER_TESTS := $(if $(filter true,$(CI)),1,$(shell docker info >/dev/null 2>&1 && echo 1))
export MESHLLM_DOCKER  := $(DOCKER_TESTS)
export MESHLLM_COMPOSE := $(DOCKER_TESTS)

.PHONY: all setup build run test test-race test-engine fuzz-short bench-engine bench bench-vt clean

all: build

setup:
	@scripts/engine-env.sh >/dev/null && echo "engine build dependencies: ok"

build: setup
	@mkdir -p bin
	$(ENGINE_ENV) && $(GO) build -ldflags '$(LDFLAGS)' -o bin/meshllm ./cmd/meshllm

run: build
	bin/meshllm demo

test: build
	@scripts/install-chromium.sh || echo "no Chromium: the browser tests will skip (and fail under CI=true)"
	$(ENGINE_ENV) && $(GO) vet ./...
	$(MAKE) test-race
	$(MAKE) test-engine
	$(MAKE) fuzz-short

test-race:
	$(GO) test -race -count=1 $(PURE_PKGS)

test-engine:
	$(ENGINE_ENV) && $(GO) test -p 1 -count=1 $(ENGINE_PKGS)
	$(GO) test -race -p 1 -count=1 $(PROCESS_PKGS)

# A short run of every fuzz target (the seed corpora also run in test-race).
fuzz-short:
	@scripts/fuzz-all.sh $(FUZZTIME)

bench-engine: build
	bin/meshllm bench-engine --shape qwen2.5-0.5b

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PURE_PKGS)

# The paper scenario on real p2p code (libp2p over simulated links, real
# Routers) in virtual time, beside the discrete-event simulation: about a
# minute on 2 cores; docs/results.md "Real p2p code in virtual time".
bench-vt:
	MESHLLM_VTMESH=1 $(GO) test ./testnet/vtmesh -run PaperScenario -v -timeout 30m

clean:
	rm -rf bin .build

# Docker: an image built FROM scratch out of bin/meshllm, the libraries ldd
# lists and stories260K (no registry needed), and the five-container mesh of
# docker-compose.yml: up, route a same-prefix request, show it forwarded,
# tear down (also on failure). MESHLLM_COMPOSE=1 runs testnet/compose's test.
.PHONY: image demo-compose

image: build
	MESHLLM_SKIP_BUILD=1 scripts/docker-image.sh

demo-compose: image
	$(GO) run ./docker/compose-demo

# A long run under faults, not part of `make test`: N peers, a steady
# MMLU/story workload, random kills, graceful restarts and freezes.
# SOAK_DURATION=2m make soak for a short run; SOAK_PEERS sets N.
SOAK_DURATION ?= 30m
SOAK_PEERS    ?= 5
.PHONY: soak
soak: build
	@mkdir -p .build
	$(GO) run ./testnet/soak -duration $(SOAK_DURATION) -peers $(SOAK_PEERS) -json .build/soak.json
