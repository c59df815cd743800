# handoff — the two commands are `make run` and `make test`.
#
#   make run             local control plane (+ PostgreSQL) with the CRDs, until Ctrl-C
#   make test            install what is missing, then fmt check, clippy, every test
#   make test-unit       the tests that need no cluster, no PostgreSQL and no agent CLI
#                        (no install step; what a change to core or the readers needs)
#   make test-e2e        the e2e tier: config/default as Pods on a real node (as root);
#                        part of make test
#   make test-reliability  only the reliability suite (faults, load, bad input); part of make test
#   make envtest-assets  build kube-apiserver, etcd, kubectl from Go modules (cached)
#   make e2e-assets      the e2e node's parts: kubelet, controller-manager, scheduler,
#                        kube-proxy, CoreDNS (cached), containerd/runc/CNI (apt, as root),
#                        and the node's pause and scripted agent programs
#   make e2e-image-binary  the static `handoff` of the local e2e image (no registry)
#   make crds            regenerate crds/ from the Rust types (and the chart's copy)
#   make helm            build Helm from its Go module (cached)
#   make promtool        build promtool from its Go module (cached; make tools too)
#   make chromium / axe-core  Debian's Chromium + ChromeDriver (apt, as root) and
#                        axe-core (npm) for the console's browser tests
#   make screenshots     the console's screenshots into docs/console (commit them)
#   make lint / fmt / build / bench   (lint runs helm lint and actionlint)
#   make release VERSION=vX.Y.Z  the release's artifacts in dist/, reproducibly
#                        (hack/release/release.sh: tarball, OCI image archive,
#                        install.yaml, crds.yaml, tenant.yaml, console.yaml, chart, SBOM,
#                        krew manifest, SHA256SUMS)
#   make test-release    make release twice: the digests must agree; part of make test
#   make image IMG=…     build the container image for $(PLATFORMS) with docker buildx
#   make set-image IMG=… point config/default and config/console at that image (kustomize edit set image)

SHELL := /bin/bash
CARGO ?= cargo
# The image config/default and config/console deploy (`make set-image` writes it there).
IMG ?= ghcr.io/handoff-dev/handoff:v0.2.0
CONTAINER_TOOL ?= docker
# The platforms `make image` builds (docker buildx; arm64 needs QEMU or an
# arm64 builder: the release workflow has both, this machine neither).
PLATFORMS ?= linux/amd64,linux/arm64
# `make release VERSION=v…`: v + the workspace version of Cargo.toml.
VERSION ?=

.PHONY: all build run test test-unit test-e2e test-reliability test-release test-deps lint fmt crds chart-crds docs-tables helm promtool envtest-assets e2e-assets e2e-image-binary postgres mcp-sdk agents-claude agents-claude-bump agents-codex agents-codex-bump agents-copilot agents-copilot-bump agents-gemini agents-gemini-bump bench clean image set-image release tools chromium axe-core screenshots

all: build

build:
	$(CARGO) build --release --locked

## The control plane binaries, built once per version into ~/.cache/handoff/envtest.
envtest-assets:
	@hack/envtest/build.sh >/dev/null

## Helm (hack/tools/helm/go.mod), built once per version into ~/.cache/handoff/tools:
## `make lint` lints the chart with it, tests/chart/ renders it.
helm:
	@hack/tools/build.sh helm >/dev/null

## The e2e node's parts, built once per version into ~/.cache/handoff/e2e
## (kubelet, controller-manager, scheduler, kube-proxy, CoreDNS, the images'
## pause and scripted agent), and the container runtime (apt, as root).
e2e-assets:
	@hack/e2e/build.sh >/dev/null

## The static (glibc crt-static) release `handoff` of the e2e node's local
## image, in target/x86_64-unknown-linux-gnu/release; fails if not static.
e2e-image-binary:
	@hack/e2e/handoff-static.sh >/dev/null

## PostgreSQL server binaries for the mirror tests and `handoff dev`.
postgres:
	@hack/ensure-postgres.sh

## Debian's Chromium and ChromeDriver for the console's browser tests
## (tests/console/browser_*.rs); apt as root, else an install hint.
chromium:
	@hack/ensure-chromium.sh

## axe-core (pinned by package-lock.json), injected by the browser tests to
## check every console page's accessibility.
axe-core: tests/console/a11y/node_modules/.installed

tests/console/a11y/node_modules/.installed: tests/console/a11y/package-lock.json
	npm ci --prefix tests/console/a11y --no-audit --no-fund --loglevel=error
	touch $@

## The console's screenshots in docs/console/ (the browser tests write them
## when HANDOFF_SCREENSHOTS names a directory); commit them.
screenshots: envtest-assets postgres chromium axe-core
	HANDOFF_SCREENSHOTS=$(CURDIR)/docs/console $(CARGO) test --locked --test console browser_a11y

run: envtest-assets
	$(CARGO) run --locked -- dev

## The real MCP client of the interop tests: the `mcp` Python SDK in .venv.
mcp-sdk: .venv/.mcp-installed tests/interop/ts/node_modules/.installed

.venv/.mcp-installed: tests/interop/requirements.txt
	python3 -m venv .venv
	.venv/bin/pip install --quiet --disable-pip-version-check -r tests/interop/requirements.txt
	touch $@

## The official TypeScript SDK (pinned by package-lock.json) for the interop check.
tests/interop/ts/node_modules/.installed: tests/interop/ts/package-lock.json
	npm ci --prefix tests/interop/ts --no-audit --no-fund --loglevel=error
	touch $@

## The real Claude Code CLI (pinned by package-lock.json) for the agents tier
## (tests/agents_claude.rs, the README's quickstart among it), driven against
## a scripted model on 127.0.0.1.
agents-claude: tests/agents/claude/node_modules/.installed

tests/agents/claude/node_modules/.installed: tests/agents/claude/package-lock.json
	npm ci --prefix tests/agents/claude --no-audit --no-fund --loglevel=error
	touch $@

## Pins @anthropic-ai/claude-code to npm's latest (package.json,
## package-lock.json) and reruns its tier; commit both files when it is green.
agents-claude-bump:
	npm install --prefix tests/agents/claude --save-exact --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@latest
	touch tests/agents/claude/node_modules/.installed
	$(CARGO) test --locked --test agents_claude

## The real Codex CLI (pinned by package-lock.json) for the agents tier (tests/agents_codex.rs).
agents-codex: tests/agents/codex/node_modules/.installed

tests/agents/codex/node_modules/.installed: tests/agents/codex/package-lock.json
	npm ci --prefix tests/agents/codex --no-audit --no-fund --loglevel=error
	touch $@

## Pins @openai/codex to npm's latest (package.json, package-lock.json) and
## reruns its tier; commit both files when it is green.
agents-codex-bump:
	npm install --prefix tests/agents/codex --save-exact --no-audit --no-fund --loglevel=error @openai/codex@latest
	touch tests/agents/codex/node_modules/.installed
	$(CARGO) test --locked --test agents_codex

## The real GitHub Copilot CLI (pinned by package-lock.json) for the agents tier (tests/agents_copilot.rs).
agents-copilot: tests/agents/copilot/node_modules/.installed

tests/agents/copilot/node_modules/.installed: tests/agents/copilot/package-lock.json
	npm ci --prefix tests/agents/copilot --no-audit --no-fund --loglevel=error
	touch $@

## Pins @github/copilot to npm's latest (package.json, package-lock.json) and
## reruns its tier; commit both files when it is green.
agents-copilot-bump:
	npm install --prefix tests/agents/copilot --save-exact --no-audit --no-fund --loglevel=error @github/copilot@latest
	touch tests/agents/copilot/node_modules/.installed
	$(CARGO) test --locked --test agents_copilot

## The real Gemini CLI (pinned by package-lock.json) for the agents tier (tests/agents_gemini.rs).
agents-gemini: tests/agents/gemini/node_modules/.installed

tests/agents/gemini/node_modules/.installed: tests/agents/gemini/package-lock.json
	npm ci --prefix tests/agents/gemini --no-audit --no-fund --loglevel=error
	touch $@

## Pins @google/gemini-cli to npm's latest (package.json, package-lock.json)
## and reruns its tier; commit both files when it is green.
agents-gemini-bump:
	npm install --prefix tests/agents/gemini --save-exact --no-audit --no-fund --loglevel=error @google/gemini-cli@latest
	touch tests/agents/gemini/node_modules/.installed
	$(CARGO) test --locked --test agents_gemini

## The developer tools built from Go modules (hack/tools/NAME/go.mod), cached
## by version: kustomize (the release's renders, set-image, the GitOps
## examples' test), actionlint (make lint) and promtool (tests/gitops.rs
## checks and unit-tests config/prometheus's alerts with it).
tools: promtool
	@hack/tools/build.sh kustomize >/dev/null
	@hack/tools/build.sh actionlint >/dev/null

## promtool (hack/tools/promtool/go.mod), built once per version into
## ~/.cache/handoff/tools: `promtool check rules` and `promtool test rules`
## of config/prometheus (tests/gitops.rs). A cold build (empty Go build
## cache) took 7.5 minutes on 2 cores, 14.5 with other builds beside it.
promtool:
	@hack/tools/build.sh promtool >/dev/null

## e2e-assets and e2e-image-binary: the image check (testkit/tests/image_containerd.rs,
## as root), the scripted agent's suite (tests/scripted_agent.rs) and the release.
test-deps: envtest-assets helm e2e-assets e2e-image-binary postgres chromium axe-core mcp-sdk agents-claude agents-codex agents-copilot agents-gemini tools

## Benchmarks are not run here (clippy --all-targets still compiles them): they
## belong to `make bench`, in release mode. The scripted agent (hack/e2e/agent,
## Go) has unit tests of its own.
test: test-deps lint
	$(CARGO) test --locked --workspace --lib --bins --tests
	cd hack/e2e/agent && go vet ./... && go test ./...
	$(MAKE) --no-print-directory test-e2e
	$(MAKE) --no-print-directory test-release

## The fast tier: every crate's unit tests and its own tests/ (none needs a
## cluster, PostgreSQL or an agent's CLI), the binary's unit tests and the
## cluster-free test files of the root (UNIT_TESTS). Installs nothing.
UNIT_TESTS := layout transcript_cli integrations docs
test-unit:
	$(CARGO) test --locked --workspace --exclude handoff --exclude handoff-testkit --lib --bins --tests
	$(CARGO) test --locked -p handoff-testkit --lib
	$(CARGO) test --locked -p handoff --lib --bins $(addprefix --test ,$(UNIT_TESTS))

## The e2e tier (tests/e2e): the control plane with one real node (containerd,
## kubelet, controller-manager, scheduler, kube-proxy, CoreDNS), the project's
## images written locally and imported (no registry), config/default installed
## as Pods; then the whole `it` suite against such a cluster, and the host
## left as it was found (one test at a time: a node holds the host); then the
## release tier (tests/e2e_release: install.yaml and the chart installed,
## upgraded while agents write, uninstalled). Needs root (docs/testing.md, "The e2e
## tier on a real node").
test-e2e: envtest-assets postgres e2e-assets e2e-image-binary mcp-sdk helm tools
	$(CARGO) test --locked --test e2e
	$(CARGO) test --locked --test e2e_existing -- --test-threads=1
	$(CARGO) test --locked --test e2e_release -- --nocapture

## The reliability suite alone (make test runs it too, so CI does).
test-reliability: test-deps
	$(CARGO) test --locked --test reliability_faults --test reliability_load --test reliability_bad_input --test reliability_bridge

## handoff-core is built alone too: inside the workspace, Cargo's feature
## unification would lend it kube's client; alone it has the derive only, so
## a module there that did I/O would not compile. The Go programs under hack/
## are held to gofmt.
lint: tools
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	$(CARGO) clippy --locked --test e2e --test e2e_existing --test e2e_release --test release -- -D warnings
	$(CARGO) check --locked -q -p handoff-core --lib
	@test -z "$$(gofmt -l hack)" || { gofmt -l hack; echo "gofmt: the files above are not formatted"; exit 1; }
	@helm="$$(hack/tools/build.sh helm)" && \
	  "$$helm" lint --strict charts/handoff && \
	  "$$helm" lint --strict charts/handoff -f charts/handoff/ci/all-values.yaml
	"$$(hack/tools/build.sh actionlint | tail -n 1)" .github/workflows/*.yml

fmt:
	$(CARGO) fmt

crds:
	$(CARGO) run --locked -q -- crd --dir crds
	@$(MAKE) --no-print-directory chart-crds
	@$(MAKE) --no-print-directory docs-tables

## docs/flags-metrics-columns.md: every flag (with its environment variable
## and default), metric and printer column, from the code (`handoff
## tables`); tests/docs.rs fails when it differs.
docs-tables:
	$(CARGO) run --locked -q -- tables > docs/flags-metrics-columns.md

## The chart's crds/handoff.yaml: config/crd as kustomize renders it (the
## generated CRDs with their GitOps no-prune annotations); tests/chart/
## fails when it differs.
chart-crds: envtest-assets
	@kubectl="$$(hack/envtest/build.sh 2>/dev/null)/kubectl" && { \
	  echo "# Generated by \`make chart-crds\` from config/crd (kubectl kustomize); do not edit."; \
	  "$$kubectl" kustomize config/crd; } > charts/handoff/crds/handoff.yaml

## Benchmarks: side-by-side ratios, written to BENCHMARKS.md (never asserted in tests),
## each beside the previous run's. Takes about 30 minutes on 2 cores plus the release
## build (the scaling stages up to 100,000 handoffs are most of it; docs/testing.md); a cheap
## check of the report:
## BENCH_ONLY=scaling BENCH_DEBUG=1 HANDOFF_BENCH_STAGES=200,1000 hack/bench-report.sh
bench: envtest-assets postgres
	hack/bench-report.sh

## The container image (multi-stage Dockerfile: static musl binary on
## distroless, non-root) for every platform of PLATFORMS, with docker buildx;
## add BUILDX_FLAGS=--push to push it, or --load for a single platform.
image:
	$(CONTAINER_TOOL) buildx build --platform $(PLATFORMS) -t $(IMG) $(BUILDX_FLAGS) .

## Sets the `images:` entry of config/default and config/console to $(IMG)
## (name:tag or name@sha256:…) with `kustomize edit set image`; commit the result.
set-image:
	@kustomize="$$(hack/tools/build.sh kustomize | tail -n 1)" && \
	for dir in config/default config/console; do \
	  (cd "$$dir" && "$$kustomize" edit set image "handoff=$(IMG)" && \
	   echo "$$dir:" && grep -B1 -A2 -- 'name: handoff' kustomization.yaml) || exit 1; \
	done

## The release's artifacts in dist/ (hack/release/release.sh, which says what
## each is); VERSION must be v + the workspace version. Reproducible: the
## same commit gives the same SHA256SUMS.
release:
	@hack/release/release.sh "$(VERSION)" dist

## The release twice, into two directories: fails when any digest differs,
## when install.yaml does not pin the image by the OCI archive's digest or
## does not parse (tests/release.rs).
test-release: e2e-image-binary tools
	$(CARGO) test --locked --test release

clean:
	$(CARGO) clean
