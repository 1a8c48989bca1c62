# syntax=docker/dockerfile:1
# Image of peering-user-controller: on a Liqo v1 provider, a peering user per consumer cluster with an active contract, its kubeconfig attached to that consumer's contracts in the catalog.
#   docker build -f deploy/docker/peering-user-controller.Dockerfile -t liqo-broker/peering-user-controller:0.1.0 .
# from the repository root (the whole workspace is the build context;
# .dockerignore keeps target/ and the test tooling out).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY . .
# One binary, from the lock file, as the README's release build does.
RUN cargo build --release --locked -p peering-users --bin peering-user-controller

# glibc and CA certificates, no shell, no package manager; uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /src/target/release/peering-user-controller /usr/local/bin/peering-user-controller
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/peering-user-controller"]
