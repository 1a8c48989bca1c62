#!/usr/bin/env bash
# The root file system of one image, assembled from a built binary:
#   rootfs.sh <binary> <dir>
# leaves in <dir>: the binary, stripped, as /usr/local/bin/<name>; every
# shared library `ldd` lists for it (the dynamic loader included), at the
# path the binary will look for it; the CA certificates, for TLS to the
# Kubernetes API server, MongoDB or the catalog.
#
# The one recipe behind both ways an image of deploy/docker/ is built: the
# release stage of each Dockerfile runs it on the binary it compiled, and
# scripts/build-images.sh runs it on the test command's debug binaries.
# Taking the libraries from the machine that linked the binary (rather than
# from a base image) means the glibc the binary runs on is the one it was
# linked against, never an older one.
set -euo pipefail

if [ "$#" -ne 2 ]; then
  echo "usage: rootfs.sh <binary> <dir>" >&2
  exit 2
fi
binary=$1
dir=$2
certs=/etc/ssl/certs/ca-certificates.crt

[ -x "$binary" ] || { echo "rootfs.sh: $binary is not an executable file" >&2; exit 1; }
[ -f "$certs" ] || { echo "rootfs.sh: no CA certificates at $certs (install ca-certificates)" >&2; exit 1; }

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
while read -r path; do
  mkdir -p "$dir$(dirname "$path")"
  # -L: the file itself where the path is a symbolic link (the loader's is).
  cp -L "$path" "$dir$path"
done < <(sed -n -e 's|.*=> \(/[^ ]*\) (.*|\1|p' -e 's|^[[:space:]]*\(/[^ ]*\) (.*|\1|p' <<<"$libraries")

cp -L "$certs" "$dir$certs"
