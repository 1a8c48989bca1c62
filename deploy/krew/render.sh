#!/usr/bin/env bash
# Write the krew manifest of a release to stdout: deploy/krew/broker.yaml
# with its placeholders filled — the version, the homepage, each archive's
# URL and sha256 — from the archives built for it.
#
#   deploy/krew/render.sh [VERSION [DOWNLOAD_BASE [HOMEPAGE [ARCHIVE_DIR]]]] > broker.yaml
#
# VERSION is the release's tag (v0.2.0); default: `v` and brokerctl's
# version in cli/Cargo.toml. DOWNLOAD_BASE is the URL the archives are
# published under, the file names appended; default:
# https://RELEASE-DOWNLOADS/VERSION. HOMEPAGE defaults to
# https://RELEASE-HOMEPAGE. The project has no release pipeline and
# publishes nothing yet, so the defaults are placeholders, not guesses:
# krew refuses to download from them, while
#   kubectl krew install --manifest=broker.yaml --archive=ARCHIVE
# installs from a local archive (krew checks its sha256, which is real).
# ARCHIVE_DIR (default build/krew) holds brokerctl-VERSION-OS-ARCH.tar.gz
# for each platform the manifest lists, each with the `brokerctl` binary
# at its root, e.g. made with
#   tar -czf brokerctl-v0.2.0-linux-amd64.tar.gz -C target/x86_64-unknown-linux-gnu/release brokerctl
# A missing archive, or one without the binary, fails the script: a
# manifest must not point at nothing. docs/images.md, "Releases".
set -euo pipefail

if [ "$#" -gt 4 ]; then
  echo "usage: $0 [VERSION [DOWNLOAD_BASE [HOMEPAGE [ARCHIVE_DIR]]]]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
if [ "$#" -ge 1 ]; then
  version=$1
else
  # The [package] version of cli/Cargo.toml, or the workspace's when it
  # inherits it (`version.workspace = true`).
  version=v$(awk -F'"' '/^\[/ { section = $0 } section == "[package]" && /^version *=/ { print $2; exit }' "$here/../../cli/Cargo.toml")
  if [ "$version" = v ]; then
    version=v$(awk -F'"' '/^\[/ { section = $0 } section == "[workspace.package]" && /^version *=/ { print $2; exit }' "$here/../../Cargo.toml")
  fi
fi
base=${2:-https://RELEASE-DOWNLOADS/$version}
base=${base%/}
homepage=${3:-https://RELEASE-HOMEPAGE}
dir=${4:-$here/../../build/krew}
template="$here/broker.yaml"
case "$version" in
  v[0-9]*) ;;
  *) echo "VERSION must look like v1.2.3, not $version" >&2; exit 2 ;;
esac

# The template's own version, replaced wherever it appears in a URL.
template_version=$(awk '$1 == "version:" { print $2; exit }' "$template")

# Each platform's archive, checked, and its digest.
shas=""
for platform in $(awk '$1 == "os:" { os = $2 } $1 == "arch:" { print os "-" $2 }' "$template"); do
  archive="$dir/brokerctl-$version-$platform.tar.gz"
  if [ ! -f "$archive" ]; then
    echo "no archive for $platform: $archive" >&2
    exit 1
  fi
  if ! tar -tzf "$archive" | grep -qx 'brokerctl\|\./brokerctl'; then
    echo "$archive holds no brokerctl at its root" >&2
    exit 1
  fi
  shas="$shas $platform=$(sha256sum "$archive" | cut -d' ' -f1)"
done

awk -v version="$version" -v old="$template_version" -v base="$base" \
    -v homepage="$homepage" -v shas="$shas" '
  BEGIN {
    n = split(shas, pairs, " ")
    for (i = 1; i <= n; i++) { split(pairs[i], kv, "="); sha[kv[1]] = kv[2] }
  }
  $1 == "os:" { os = $2 }
  $1 == "arch:" { platform = os "-" $2 }
  $1 == "version:" && !done_version { sub(old, version); done_version = 1 }
  $1 == "homepage:" { sub(/https:\/\/RELEASE-HOMEPAGE/, homepage) }
  $1 == "uri:" {
    sub(/https:\/\/RELEASE-DOWNLOADS\/[^ ]*/, base "/brokerctl-" version "-" platform ".tar.gz")
  }
  $1 == "sha256:" { sub(/"[0-9a-f]*"/, "\"" sha[platform] "\"") }
  { print }
' "$template"
