# syntax=docker/dockerfile:1
# Image of resource-monitor: the Liqo v0.x resource plugin, and with --liqo-api v1 the ResourceSlice class controller.
#   docker build -f deploy/docker/resource-monitor.Dockerfile -t liqo-broker/resource-monitor:0.1.0 .
# from the repository root (the whole workspace is the build context;
# .dockerignore keeps target/ and the test tooling out).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY . .
# One binary, from the lock file, as the README's release build does.
RUN cargo build --release --locked -p resource-monitor --bin resource-monitor

# glibc and CA certificates, no shell, no package manager; uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /src/target/release/resource-monitor /usr/local/bin/resource-monitor
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/resource-monitor"]
