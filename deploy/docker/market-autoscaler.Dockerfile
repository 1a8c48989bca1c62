# syntax=docker/dockerfile:1
# Image of the market-autoscaler (buys capacity in the catalog for waiting
# pods, within a budget in money, and gives it back when it sits idle).
# One recipe; the binary comes from one of two places (BINARY):
#   release (the default) compiles it here, from the repository root:
#     docker build -f deploy/docker/market-autoscaler.Dockerfile -t liqo-broker/market-autoscaler:0.1.0 .
#     (buildah and podman 1.28 also need --build-arg BINARY=release)
#     (the whole workspace is the build context; .dockerignore keeps
#     target/ and the test tooling out);
#   prebuilt takes the root file system scripts/build-images.sh assembled
#   from a binary built outside, its directory being the build context:
#     buildah build -f deploy/docker/market-autoscaler.Dockerfile --build-arg BINARY=prebuilt build/images/market-autoscaler
# Either way deploy/docker/rootfs.sh assembles what ships. See docs/images.md.

ARG RUST_VERSION=1.95
ARG BINARY=release

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS release
WORKDIR /src
COPY . .
# One binary, from the lock file, as the README's release build does.
RUN cargo build --release --locked -p market-autoscaler --bin market-autoscaler \
 && bash deploy/docker/rootfs.sh target/release/market-autoscaler /rootfs

FROM scratch AS prebuilt
COPY rootfs/ /rootfs/

# The stage named by BINARY; only it is built.
FROM ${BINARY} AS binary

# The binary, the libraries ldd lists for it and CA certificates: no shell,
# no package manager. Numeric user (65532, distroless's nonroot): there is
# no /etc/passwd to name one, and Kubernetes' runAsNonRoot needs a number.
FROM scratch
COPY --from=binary /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/market-autoscaler"]
