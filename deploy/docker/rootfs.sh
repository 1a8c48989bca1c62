#!/usr/bin/env bash
# The root file system of one image, assembled from a built binary:
#   rootfs.sh <binary> <dir> [<package>]
# leaves in <dir>: the binary, stripped, as /usr/local/bin/<name>; every
# shared library `ldd` lists for it (the dynamic loader included), at the
# path the binary will look for it; the CA certificates, for TLS to the
# Kubernetes API server, MongoDB or the catalog; and what vulnerability
# scanners read, as distroless lays it out:
#   - /etc/os-release (and /etc/debian_version) of the machine the files
#     come from, so a scanner knows which distribution's advisories apply;
#   - for each Debian package a copied file belongs to, its dpkg status
#     entry (var/lib/dpkg/status.d/<package>, from `dpkg-query -s`) and the
#     MD5 of each file shipped from it (status.d/<package>.md5sums), after
#     checking that the copy is the package's own file (dpkg's md5sums);
#     a file no package owns stops the build, as a scanner could not see it;
#   - with <package> (the workspace crate that builds <binary>), the SBOM of
#     the crates compiled into the binary, /usr/share/sbom/<name>.cdx.json
#     (CycloneDX, deploy/docker/sbom.py; needs cargo and python3).
#
# The one recipe behind both ways an image of deploy/docker/ is built: the
# release stage of each Dockerfile runs it on the binary it compiled, and
# scripts/build-images.sh runs it on the test command's debug binaries.
# Taking the libraries from the machine that linked the binary (rather than
# from a base image) means the glibc the binary runs on is the one it was
# linked against, never an older one.
set -euo pipefail

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
  echo "usage: rootfs.sh <binary> <dir> [<package>]" >&2
  exit 2
fi
binary=$1
dir=$2
package=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
certs=/etc/ssl/certs/ca-certificates.crt

[ -x "$binary" ] || { echo "rootfs.sh: $binary is not an executable file" >&2; exit 1; }
[ -f "$certs" ] || { echo "rootfs.sh: no CA certificates at $certs (install ca-certificates)" >&2; exit 1; }
for tool in dpkg-query md5sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "rootfs.sh: $tool missing: the files must come from a Debian system" >&2; exit 1; }
done

mkdir -p "$dir/usr/local/bin" "$dir/etc/ssl/certs"
strip -o "$dir/usr/local/bin/$(basename "$binary")" "$binary"

# ldd prints `name => /path (address)` for libraries, `/path (address)` for
# the loader and `name (address)` for the kernel's vDSO (no file to copy).
# A static binary has nothing to list and makes ldd exit 1; a library ldd
# cannot find is an image that would not start, so it stops the build.
libraries=$(ldd "$binary" 2>&1) || case $libraries in
  *"not a dynamic executable"* | *"statically linked"*) libraries="" ;;
  *) echo "rootfs.sh: ldd $binary: $libraries" >&2; exit 1 ;;
esac
if grep -q "not found" <<<"$libraries"; then
  echo "rootfs.sh: $binary needs libraries this machine lacks:" >&2
  grep "not found" <<<"$libraries" >&2
  exit 1
fi
status=$dir/var/lib/dpkg/status.d
mkdir -p "$status"

# The Debian package that owns $1 (a path as the binary names it), by that
# path, its target, or either without /usr-merge's /usr (dpkg records the
# path the package ships, which may be the other one).
owner() {
  local path=$1 real candidate found
  real=$(readlink -f "$path")
  for candidate in "$path" "$real" "${path#/usr}" "${real#/usr}" "/usr$path" "/usr$real"; do
    # `pkg:arch: path`; diversions add lines of another form.
    found=$(dpkg-query -S "$candidate" 2>/dev/null | sed -n 's|^\([^ ,:]*\)\(:[^ ,:]*\)\{0,1\}: /.*|\1|p' | head -n 1)
    if [ -n "$found" ]; then
      echo "$found"
      return 0
    fi
  done
  return 1
}

# The MD5 dpkg recorded for $2 in package $1's files (by the path or its
# target, with or without /usr), empty if none.
recorded_md5() {
  local package=$1 path=$2 real list candidate
  real=$(readlink -f "$path")
  for list in /var/lib/dpkg/info/"$package".md5sums /var/lib/dpkg/info/"$package":*.md5sums; do
    [ -f "$list" ] || continue
    for candidate in "$path" "$real" "${path#/usr}" "${real#/usr}" "/usr$path" "/usr$real"; do
      awk -v p="${candidate#/}" '$2 == p { print $1; exit }' "$list"
    done
  done | head -n 1
}

# Copy $1 into the image at the same path and record the package it is from.
ship() {
  local path=$1 package md5 expected
  package=$(owner "$path") || { echo "rootfs.sh: no Debian package owns $path: a scanner could not see it" >&2; exit 1; }
  mkdir -p "$dir$(dirname "$path")"
  # -L: the file itself where the path is a symbolic link (the loader's is).
  cp -L "$path" "$dir$path"
  md5=$(md5sum "$dir$path" | cut -d' ' -f1)
  expected=$(recorded_md5 "$package" "$path")
  if [ -n "$expected" ] && [ "$expected" != "$md5" ]; then
    echo "rootfs.sh: $path differs from the file package $package installed (md5 $md5, dpkg says $expected)" >&2
    exit 1
  fi
  if [ ! -f "$status/$package" ]; then
    dpkg-query -s "$package" >"$status/$package"
  fi
  echo "$md5  ${path#/}" >>"$status/$package.md5sums"
}

while read -r path; do
  ship "$path"
done < <(sed -n -e 's|.*=> \(/[^ ]*\) (.*|\1|p' -e 's|^[[:space:]]*\(/[^ ]*\) (.*|\1|p' <<<"$libraries")

# Which distribution (and release) the packages are from.
ship /etc/os-release
if [ -f /etc/debian_version ]; then ship /etc/debian_version; fi

# The bundle is generated by update-ca-certificates (no package lists it as
# its file), from the certificates of ca-certificates: its entry says which.
cp -L "$certs" "$dir$certs"
if dpkg-query -s ca-certificates >/dev/null 2>&1; then
  dpkg-query -s ca-certificates >"$status/ca-certificates"
fi

if [ -n "$package" ]; then
  mkdir -p "$dir/usr/share/sbom"
  python3 "$here/sbom.py" "$package" "$(basename "$binary")" >"$dir/usr/share/sbom/$(basename "$binary").cdx.json"
fi
