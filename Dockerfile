# syntax=docker/dockerfile:1
#
# A small static image of the `handoff` binary (controller, bridge and CLI):
#   make image IMG=ghcr.io/handoff-dev/handoff:v0.2.0   (docker buildx, PLATFORMS)
#
# Stage 1 builds a fully static musl binary on Alpine (rusqlite's bundled
# SQLite and ring's C/assembly need a C toolchain: musl-dev provides it).
# For a foreign platform (linux/arm64 on an amd64 builder) buildx runs this
# stage under QEMU emulation: slow, but no cross toolchain to keep.
# Stage 2 is distroless/static: no shell, no package manager, CA
# certificates and tzdata only, user `nonroot` (65532).
#
# The release's linux/amd64 image is not built here but written by the test
# kit (`make release`: testkit/src/bin/release-image.rs) from the glibc
# static binary, reproducibly, with this final stage's base files, user and
# entrypoint (a unit test of testkit/src/image.rs fails when they diverge).

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
