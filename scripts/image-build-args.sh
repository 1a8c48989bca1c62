#!/usr/bin/env bash
# The build arguments that fill an image's org.opencontainers.image.*
# labels (deploy/docker/*.Dockerfile's final stage), on one line:
#   scripts/image-build-args.sh <package>
# prints `--build-arg VERSION=… --build-arg REVISION=… --build-arg
# CREATED=… --build-arg SOURCE=… --build-arg SOURCE_DATE_EPOCH=…`, for
#   docker build $(bash scripts/image-build-args.sh catalog) \
#     -f deploy/docker/catalog.Dockerfile -t liqo-broker/catalog:0.1.0 .
# (scripts/build-images.sh passes the same to buildah).
#   VERSION   the cargo package's version (`cargo pkgid`);
#   REVISION  the commit: `git rev-parse HEAD` (IMAGE_REVISION overrides it,
#             for a build from an export without .git);
#   CREATED   SOURCE_DATE_EPOCH if set, else the commit's time, as RFC 3339
#             UTC: the same commit gives the same label (reproducible), and
#             SOURCE_DATE_EPOCH also dates the SBOM;
#   SOURCE    IMAGE_SOURCE, else the git remote `origin` as an https URL,
#             else https://RELEASE-SOURCE: the project publishes no
#             repository URL yet, and a placeholder says so where a guess
#             would mislead.
# A value that cannot be found fails the script, naming it: an image
# labelled `unknown` would tell a scanner nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -ne 1 ]; then
  echo "usage: image-build-args.sh <cargo package>" >&2
  exit 2
fi
package=$1

pkgid=$(cargo pkgid --offline -p "$package" 2>&1) \
  || { echo "image-build-args: no version for package $package: $pkgid" >&2; exit 1; }
# path+file:///…/catalog#0.1.0, or …#name@0.1.0 when the directory is named otherwise.
version=${pkgid##*[#@]}

if [ -n "${IMAGE_REVISION:-}" ]; then
  revision=$IMAGE_REVISION
else
  revision=$(git rev-parse HEAD 2>/dev/null) \
    || { echo "image-build-args: not a git checkout: set IMAGE_REVISION to the commit the sources are" >&2; exit 1; }
fi

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct "$revision" 2>/dev/null) \
    || { echo "image-build-args: no commit time for $revision: set SOURCE_DATE_EPOCH" >&2; exit 1; }
fi
case $SOURCE_DATE_EPOCH in
  '' | *[!0-9]*) echo "image-build-args: SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH is not a number of seconds" >&2; exit 1 ;;
esac
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

source=${IMAGE_SOURCE:-}
if [ -z "$source" ]; then
  source=$(git remote get-url origin 2>/dev/null || true)
  # git@host:owner/repo(.git) -> https://host/owner/repo
  source=$(sed -E -e 's|^git@([^:]+):|https://\1/|' -e 's|\.git$||' <<<"$source")
  case $source in
    https://*) ;;
    *) source=https://RELEASE-SOURCE ;;
  esac
fi

echo "--build-arg VERSION=$version --build-arg REVISION=$revision --build-arg CREATED=$created" \
  "--build-arg SOURCE=$source --build-arg SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"
