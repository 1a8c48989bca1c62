# syntax=docker/dockerfile:1
# Image of the catalog (its web UI is embedded in the binary by rust-embed, so nothing else ships).
#   docker build -f deploy/docker/catalog.Dockerfile -t liqo-broker/catalog:0.1.0 .
# from the repository root (the whole workspace is the build context;
# .dockerignore keeps target/ and the test tooling out).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY . .
# One binary, from the lock file, as the README's release build does.
RUN cargo build --release --locked -p catalog --bin catalog

# glibc and CA certificates, no shell, no package manager; uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /src/target/release/catalog /usr/local/bin/catalog
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/catalog"]
