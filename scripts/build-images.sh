#!/usr/bin/env bash
# Builds every image of deploy/docker/ from the binaries the test command
# already built (no second, release, build), records its size and runs it:
#   for each deploy/docker/<image>.Dockerfile, one at a time,
#   1. deploy/docker/rootfs.sh assembles build/images/<image>/rootfs from a
#      stripped copy of target/debug/<bin> (<bin>: the ENTRYPOINT's name),
#      with the dpkg entries of the libraries it copies and the SBOM of
#      <package> (the crate the Dockerfile's release stage builds);
#   2. Debian's buildah builds the Dockerfile with BINARY=prebuilt and the
#      label values of scripts/image-build-args.sh (vfs storage under
#      build/images/, chroot isolation: no daemon, no overlay mounts,
#      nothing run inside the image while building);
#   3. the image's size is recorded (as stored, and its layers as pushed:
#      gzip-compressed, what a registry transfers), its labels are read
#      back (buildah inspect), it is exported to an OCI layout and the
#      storage is removed;
#   4. umoci unpacks that layout to a runtime bundle; scripts/check-image.py
#      holds it to what scanners need (every file but ours listed in a
#      package entry, the labels carrying the build's values, the SBOM
#      listing every crate `cargo tree -p <package>` compiles in); the entrypoint
#      from the image's own configuration runs chrooted into it, with the
#      image's environment and, as root, the image's user (`chroot
#      --userspec`; otherwise `unshare -r chroot`, which cannot take on
#      another user): `--help` must exit 0, and the catalog must start on a
#      free loopback port and answer GET /healthz with 200.
# Containers cannot run here (podman and crun need a cgroup v2 or v1-only
# host, CI's is hybrid), so a chroot stands in: it runs what the image holds
# and nothing of the host's file system, and as the image's user the kernel
# checks that user's rights to the image's files as a container's would.
#
# Prints a table of sizes (also in build/images/sizes.txt), the time each
# image took and the most disk the stage held at once; removes everything
# else it made. Settings: IMAGE_BINARIES (default target/debug), the
# directory the binaries are taken from.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
binaries=${IMAGE_BINARIES:-$root/target/debug}
work=$root/build/images
buildah=(buildah --storage-driver vfs --root "$work/storage" --runroot "$work/run")

for tool in buildah umoci unshare chroot strip python3 cargo git dpkg-query; do
  command -v "$tool" >/dev/null 2>&1 \
    || { echo "build-images: $tool missing (bash scripts/install-test-deps.sh; cargo, git and dpkg-query come with the build machine)" >&2; exit 1; }
done

# Each image's commands write to its own log; a failing one stops the stage
# (set -e) from inside that redirection, so the log is shown on the stderr
# kept here (fd 3), not on the log itself.
exec 3>&2
catalog_pid=""
log=""
cleanup() {
  local status=$?
  set +e
  if [ "$status" -ne 0 ] && [ -n "$log" ] && [ -f "$log" ]; then
    echo "build-images: ${image:-?} failed:" >&3
    cat "$log" >&3
  fi
  if [ -n "$catalog_pid" ] && kill -0 "$catalog_pid" 2>/dev/null; then
    kill "$catalog_pid" 2>/dev/null || true
    wait "$catalog_pid" 2>/dev/null || true
  fi
  # vfs layers are plain directories: removing them needs no buildah.
  rm -rf "$work/storage" "$work/run" "$work/oci" "$work"/*/ "$work/cargo-metadata.json"
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work"

peak=0
measure_disk() {
  local used
  used=$(du -sxk "$work" | cut -f1)
  [ "$used" -gt "$peak" ] && peak=$used
  return 0
}

# The user (uid:gid), then the entrypoint's argv, one per line, then `--`,
# then the environment, one VAR=value per line, from an unpacked bundle's
# runtime configuration.
bundle_process() {
  python3 - "$1/config.json" <<'PY'
import json, sys
process = json.load(open(sys.argv[1]))["process"]
print(f'{process["user"]["uid"]}:{process["user"]["gid"]}')
print("\n".join(process["args"]))
print("--")
print("\n".join(process.get("env", [])))
PY
}

# GET $1 until it answers 200 (exit 0), the process $2 ends or 10 s pass
# (exit 1): polled, so the catalog's own start time decides.
serves_200() {
  python3 - "$1" "$2" <<'PY'
import os, sys, time, urllib.request
url, pid, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        if urllib.request.urlopen(url, timeout=1).status == 200:
            sys.exit(0)
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)
sys.exit(1)
PY
}

catalog_serves_healthz() {
  local rootfs=$1 log=$2
  shift 2
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # The volume stands where the Deployment mounts it, as kubelet leaves an
  # emptyDir with fsGroup 65532: owned by root, group 65532, setgid and
  # group-writable. The catalog's --data-dir is a directory it makes inside
  # (it restricts that one to 0700, which only its owner may do: the
  # volume's root itself would refuse it).
  mkdir -p "$rootfs/var/lib/catalog"
  if [ "$(id -u)" -eq 0 ]; then chown "0:${user#*:}" "$rootfs/var/lib/catalog"; fi
  chmod 2775 "$rootfs/var/lib/catalog"
  "$@" --listen "127.0.0.1:$port" --data-dir /var/lib/catalog/data >"$log" 2>&1 &
  catalog_pid=$!
  local served=0
  serves_200 "http://127.0.0.1:$port/healthz" "$catalog_pid" || served=$?
  kill "$catalog_pid" 2>/dev/null || true
  wait "$catalog_pid" 2>/dev/null || true
  catalog_pid=""
  if [ "$served" -ne 0 ]; then
    echo "the catalog in the image did not answer GET /healthz with 200 within 10 s; its log:"
    cat "$log"
    return 1
  fi
  echo "GET /healthz: 200"
}

# The workspace's dependency graph, for every image's SBOM (deploy/docker/sbom.py):
# the same for all nine, so read once.
export SBOM_CARGO_METADATA=$work/cargo-metadata.json
cargo metadata --format-version 1 --offline --locked \
  --filter-platform "$(rustc -vV | sed -n 's/^host: //p')" >"$SBOM_CARGO_METADATA"

printf '%-26s %12s %12s %8s\n' image stored pushed seconds | tee "$work/sizes.txt"
# Seconds since $1 (an $EPOCHREALTIME), one decimal.
since() { awk -v from="$1" -v now="$EPOCHREALTIME" 'BEGIN { printf "%.1f", now - from }'; }
stage_start=$EPOCHREALTIME
for dockerfile in deploy/docker/*.Dockerfile; do
  image=$(basename "$dockerfile" .Dockerfile)
  start=$EPOCHREALTIME
  entry=$(sed -n 's|^ENTRYPOINT \["\([^"]*\)".*|\1|p' "$dockerfile")
  bin=$(basename "$entry")
  if [ -z "$entry" ] || [ ! -x "$binaries/$bin" ]; then
    echo "build-images: $dockerfile: no binary ${bin:-(no ENTRYPOINT)} in $binaries" >&2
    exit 1
  fi
  # The crate the release stage builds (`cargo build … -p <package>`).
  package=$(sed -n 's|.*cargo build .*-p \([^ ]*\) .*|\1|p' "$dockerfile" | head -n 1)
  if [ -z "$package" ]; then
    echo "build-images: $dockerfile: no \`cargo build … -p <package>\` in its release stage" >&2
    exit 1
  fi
  context=$work/$image
  log=$work/$image.log
  {
    # `--build-arg K=V` pairs; the values hold no spaces (a version, a
    # commit, a date, a URL).
    args_line=$(bash scripts/image-build-args.sh "$package")
    read -ra build_args <<<"$args_line"
    expected=()
    for arg in "${build_args[@]}"; do
      if [ "$arg" != --build-arg ]; then expected+=("$arg"); fi
    done
    # The SBOM's date: the one the labels carry.
    for arg in "${expected[@]}"; do
      case $arg in SOURCE_DATE_EPOCH=*) export "$arg" ;; esac
    done
    bash deploy/docker/rootfs.sh "$binaries/$bin" "$context/rootfs" "$package"
    "${buildah[@]}" build --quiet --isolation chroot --build-arg BINARY=prebuilt "${build_args[@]}" \
      -f "$dockerfile" -t "liqo-broker/$image:test" "$context"
    stored=$("${buildah[@]}" images --noheading --format '{{.Size}}' "liqo-broker/$image:test")
    "${buildah[@]}" inspect --type image "liqo-broker/$image:test" >"$work/$image.inspect.json"
    "${buildah[@]}" push --quiet "liqo-broker/$image:test" "oci:$work/oci:$image"
    measure_disk
    rm -rf "$work/storage" "$work/run"
    # Layers as pushed: the blobs the manifest lists, config excluded.
    pushed=$(python3 - "$work/oci" "$image" <<'PY'
import json, sys, pathlib
layout, tag = pathlib.Path(sys.argv[1]), sys.argv[2]
blob = lambda d: layout / "blobs" / d.split(":")[0] / d.split(":")[1]
index = json.loads((layout / "index.json").read_text())
desc = next(m for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
manifest = json.loads(blob(desc["digest"]).read_text())
print(f'{sum(layer["size"] for layer in manifest["layers"]) / 1e6:.1f} MB')
PY
)
    umoci unpack --image "$work/oci:$image" "$context/bundle" >/dev/null
    measure_disk
    mapfile -t process < <(bundle_process "$context/bundle")
    user=${process[0]}
    separator=1
    while [ "${process[$separator]}" != "--" ]; do separator=$((separator + 1)); done
    argv=("${process[@]:1:$((separator - 1))}")
    environment=()
    for variable in "${process[@]:$((separator + 1))}"; do
      if [ -n "$variable" ]; then environment+=("$variable"); fi
    done
    rootfs=$context/bundle/rootfs
    python3 scripts/check-image.py "$rootfs" "$image" "$package" "$bin" "$work/$image.inspect.json" \
      "${expected[@]}" | tee "$work/$image.checks"
    # Absolute paths: `env -i` looks commands up in the image's PATH.
    if [ "$(id -u)" -eq 0 ]; then
      run=(env -i "${environment[@]}" "$(command -v chroot)" --userspec="$user" "$rootfs" "${argv[@]}")
      as=$user
    else
      as="root in a user namespace"
      run=(env -i "${environment[@]}" "$(command -v unshare)" -r "$(command -v chroot)" "$rootfs" "${argv[@]}")
    fi
    "${run[@]}" --help >"$work/$image.help"
    echo "${argv[*]} --help, as $as: exit 0"
    if [ "$image" = catalog ]; then
      catalog_serves_healthz "$rootfs" "$work/$image.run.log" "${run[@]}"
    fi
    rm -rf "$context"
    printf '%-26s %12s %12s %8s\n' "$image" "$stored" "$pushed" "$(since "$start")" >>"$work/sizes.txt"
  } >"$log" 2>&1
  tail -n 1 "$work/sizes.txt"
  sed 's/^/    /' "$work/$image.checks"
done
log=""
echo "most disk held at once: $((peak / 1024)) MB under $work"
echo "built, exported, unpacked and run in $(since "$stage_start") s"
