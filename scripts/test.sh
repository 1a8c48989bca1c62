#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what the tests need,
# builds every binary, then runs lint, unit, property, end-to-end (real
# binaries over HTTP, WebSocket and gRPC) and browser tests.
# Exits non-zero on the first failing stage.
set -euo pipefail
cd "$(dirname "$0")/.."

stage() { printf '\n==> %s\n' "$*"; }

# A one-shot build gains nothing from incremental caches, which would add
# gigabytes to target/. Disk is reported at start and end so a machine that
# runs short says so plainly.
export CARGO_INCREMENTAL=0
# Clippy lints every workspace crate while the build and test stages compile
# it: clippy-driver as the workspace's rustc wrapper is what `cargo clippy`
# runs, here with code generation, so no separate `cargo clippy --all-targets`
# type-checks every dependency a second time (3 minutes on the CI machine).
# The build stage covers libraries, binaries, benches and examples; the test
# stage libraries and binaries under cfg(test) and the integration tests —
# every target `--all-targets` names. `-D warnings` reaches the workspace
# only: cargo caps the lints of registry dependencies.
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)"
if [ ! -x "$RUSTC_WORKSPACE_WRAPPER" ]; then
  echo "clippy-driver not found: install clippy (rustup component add clippy)" >&2
  exit 1
fi
export RUSTC_WORKSPACE_WRAPPER
export RUSTFLAGS="-D warnings"
disk() { df -h . | awk 'NR==2 {print "disk: " $4 " free of " $2}'; }
disk

stage "installing test dependencies"
bash scripts/install-test-deps.sh

stage "checking formatting"
cargo fmt --all -- --check
# A dev-dependency that changes a shared crate's features makes the test
# stage compile half the dependency tree again: refused here, in seconds.
python3 scripts/check-features.py

stage "building every binary, bench and example (clippy lints as it compiles)"
cargo build --workspace --bins --benches --examples --locked

stage "unit, property and end-to-end tests (clippy lints the test targets as they compile)"
# Every test API server writes the calls it answered, with who made them,
# here; deploy-check then holds them against the RBAC in deploy/. Wiped
# first, so calls from an earlier run cannot stand in for this one's.
export KUBE_TEST_AUDIT_DIR="$(pwd)/build/kube-audit"
rm -rf "$KUBE_TEST_AUDIT_DIR"
mkdir -p "$KUBE_TEST_AUDIT_DIR"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
  cargo test --workspace --doc --locked
else
  cargo test --workspace --locked --no-fail-fast
fi

stage "deploy/: RBAC against the end-to-end tests' calls, images, container flags"
# The binary the build stage made: `cargo run -p deploy-check` would resolve
# features for that one package and compile ~40 s of dependencies again.
target/debug/deploy-check --deploy deploy/kubernetes --audit build/kube-audit
unset KUBE_TEST_AUDIT_DIR

# Schemathesis and the browser tests each start their own catalog on a free
# port and leave a core mostly idle (one waits on Python, the other on a
# browser), so they run side by side; Schemathesis's output follows the
# browser tests' so neither interleaves with the other. The images
# (scripts/build-images.sh: built from this build's binaries, each run once)
# take the idle core's time as well: 30 s alone, 90 s beside the two (mostly
# buildah and gzip), done long before the browser tests, so they add no wall
# time of their own (docs/images.md).
stage "Schemathesis against the catalog's OpenAPI document and the images, beside the browser tests"
schemathesis_log="$(pwd)/build/schemathesis.log"
CATALOG_BIN="$(pwd)/target/debug/catalog" bash scripts/schemathesis.sh >"$schemathesis_log" 2>&1 &
schemathesis_pid=$!
images_log="$(pwd)/build/build-images.log"
bash scripts/build-images.sh >"$images_log" 2>&1 &
images_pid=$!
browser_status=0
if [ -f tests/browser/run.mjs ]; then
  stage "browser tests (headless Chromium)"
  CATALOG_BIN="$(pwd)/target/debug/catalog" node tests/browser/run.mjs || browser_status=$?
fi
schemathesis_status=0
wait "$schemathesis_pid" || schemathesis_status=$?
images_status=0
wait "$images_pid" || images_status=$?
stage "Schemathesis's output"
cat "$schemathesis_log"
stage "the images' output (deploy/docker/ built with buildah, run under unshare -r chroot)"
cat "$images_log"
if [ "$browser_status" -ne 0 ] || [ "$schemathesis_status" -ne 0 ] || [ "$images_status" -ne 0 ]; then
  echo "failed: browser tests exit $browser_status, Schemathesis exit $schemathesis_status," \
    "images exit $images_status" >&2
  exit 1
fi

disk
stage "all tests passed"
