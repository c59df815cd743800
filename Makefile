# handoff — the two commands are `make run` and `make test`.
#
#   make run             local control plane (+ PostgreSQL) with the CRDs, until Ctrl-C
#   make test            install what is missing, then fmt check, clippy, every test
#   make envtest-assets  build kube-apiserver, etcd, kubectl from Go modules (cached)
#   make crds            regenerate crds/ from the Rust types
#   make lint / fmt / build / bench

SHELL := /bin/bash
CARGO ?= cargo

.PHONY: all build run test test-deps lint fmt crds envtest-assets postgres mcp-sdk bench clean

all: build

build:
	$(CARGO) build --release --locked

## The control plane binaries, built once per version into ~/.cache/handoff/envtest.
envtest-assets:
	@hack/envtest/build.sh >/dev/null

## PostgreSQL server binaries for the mirror tests and `handoff dev`.
postgres:
	@hack/ensure-postgres.sh

run: envtest-assets
	$(CARGO) run --locked -- dev

## The real MCP client of the interop tests: the `mcp` Python SDK in .venv.
mcp-sdk: .venv/.mcp-installed

.venv/.mcp-installed: tests/interop/requirements.txt
	python3 -m venv .venv
	.venv/bin/pip install --quiet --disable-pip-version-check -r tests/interop/requirements.txt
	touch $@

test-deps: envtest-assets postgres mcp-sdk

test: test-deps lint
	$(CARGO) test --locked --all-targets

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

fmt:
	$(CARGO) fmt

crds:
	$(CARGO) run --locked -q -- crd --dir crds

## Benchmarks: side-by-side ratios printed as markdown tables (never asserted in tests).
bench: envtest-assets
	$(CARGO) bench --locked --bench bridge
	$(CARGO) bench --locked --bench transcript

clean:
	$(CARGO) clean
