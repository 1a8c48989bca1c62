# syntax=docker/dockerfile:1
# Image of purchase-controller: on a consumer cluster, turns catalog contracts (Purchases) into Liqo peerings, ResourceSlices and NamespaceOffloadings.
# One recipe; the binary comes from one of two places (BINARY):
#   release (the default) compiles it here, from the repository root:
#     docker build -f deploy/docker/purchase-controller.Dockerfile -t liqo-broker/purchase-controller:0.1.0 .
#     (buildah and podman 1.28 also need --build-arg BINARY=release)
#     (the whole workspace is the build context; .dockerignore keeps
#     target/ and the test tooling out);
#   prebuilt takes the root file system scripts/build-images.sh assembled
#   from a binary built outside, its directory being the build context:
#     buildah build -f deploy/docker/purchase-controller.Dockerfile --build-arg BINARY=prebuilt build/images/purchase-controller
# Either way deploy/docker/rootfs.sh assembles what ships. See docs/images.md.

ARG RUST_VERSION=1.95
ARG BINARY=release

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS release
WORKDIR /src
COPY . .
# python3 runs deploy/docker/sbom.py (the image's SBOM); the Rust image may
# lack it. SOURCE_DATE_EPOCH dates the SBOM (scripts/image-build-args.sh).
ARG SOURCE_DATE_EPOCH
RUN command -v python3 >/dev/null \
 || (apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*)
# One binary, from the lock file, as the README's release build does.
RUN cargo build --release --locked -p purchase-controller --bin purchase-controller \
 && bash deploy/docker/rootfs.sh target/release/purchase-controller /rootfs purchase-controller

FROM scratch AS prebuilt
COPY rootfs/ /rootfs/

# The stage named by BINARY; only it is built.
FROM ${BINARY} AS binary

# The binary, the libraries ldd lists for it, CA certificates, the dpkg
# entries of those files' packages and the SBOM: no shell, no package
# manager. Numeric user (65532, distroless's nonroot): there is
# no /etc/passwd to name one, and Kubernetes' runAsNonRoot needs a number.
FROM scratch
COPY --from=binary /rootfs/ /
# What registries and scanners show of the image; the values come from
# scripts/image-build-args.sh (docs/images.md), the defaults say they were
# not given.
ARG VERSION=unknown
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=https://RELEASE-SOURCE
LABEL org.opencontainers.image.title="purchase-controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/purchase-controller"]
