# syntax=docker/dockerfile:1
# Image of purchase-controller: on a consumer cluster, turns catalog contracts (Purchases) into Liqo peerings, ResourceSlices and NamespaceOffloadings.
#   docker build -f deploy/docker/purchase-controller.Dockerfile -t liqo-broker/purchase-controller:0.1.0 .
# from the repository root (the whole workspace is the build context;
# .dockerignore keeps target/ and the test tooling out).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY . .
# One binary, from the lock file, as the README's release build does.
RUN cargo build --release --locked -p purchase-controller --bin purchase-controller

# glibc and CA certificates, no shell, no package manager; uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /src/target/release/purchase-controller /usr/local/bin/purchase-controller
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/purchase-controller"]
