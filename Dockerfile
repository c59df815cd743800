# syntax=docker/dockerfile:1
#
# A small static image of the `handoff` binary (controller, bridge and CLI):
#   make image IMG=ghcr.io/handoff-dev/handoff:0.1.0
#
# Stage 1 builds a fully static musl binary on Alpine (rusqlite's bundled
# SQLite and ring's C/assembly need a C toolchain: musl-dev provides it).
# Stage 2 is distroless/static: no shell, no package manager, CA
# certificates and tzdata only, user `nonroot` (65532).

ARG RUST_VERSION=1.95
FROM docker.io/library/rust:${RUST_VERSION}-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
# The whole workspace (crates/ are the layers; include_str! embeds files of
# config/, docs/ and hack/), .dockerignore keeping target/ and .venv out. Only
# the `handoff` binary is built: the test kit (testkit/, a dev-dependency) is
# never compiled here. BuildKit caches the registry and the target directory
# between builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_PROFILE_RELEASE_STRIP=symbols cargo build --release --locked --bin handoff \
 && cp target/release/handoff /handoff

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /handoff /handoff
# Numeric, so the kubelet can verify runAsNonRoot without /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/handoff"]
