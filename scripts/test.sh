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

# What the tests need beyond the toolchain downloads and unpacks (apt, pip,
# npm) while the build keeps both cores busy; its output is printed, and a
# failure stops the run, before the first test.
mkdir -p build
install_log="$(pwd)/build/install-test-deps.log"
stage "installing test dependencies (beside the formatting check and the build; output below)"
bash scripts/install-test-deps.sh >"$install_log" 2>&1 &
install_pid=$!

stage "checking formatting"
cargo fmt --all -- --check
# A dev-dependency that changes a shared crate's features makes the test
# stage compile half the dependency tree again: refused here, in seconds.
python3 scripts/check-features.py
# The chart README's values table is generated from values.yaml's
# comments: refused here while it is not theirs (in well under a second).
python3 scripts/chart-values-table.py --check

stage "building every binary, bench and example (clippy lints as it compiles)"
# --timings: each unit's compile time (target/cargo-timings/), summed per
# crate at the end of the run, so a change can show what it adds.
cargo build --workspace --bins --benches --examples --locked --timings

stage "test dependencies' installation"
install_status=0
wait "$install_pid" || install_status=$?
cat "$install_log"
if [ "$install_status" -ne 0 ]; then
  echo "failed: scripts/install-test-deps.sh exit $install_status" >&2
  exit 1
fi

# Schemathesis, the images and the browser tests need only the binaries the
# build made, and mostly wait (on Python, on buildah's gzip, on a browser):
# they run beside the Rust tests, each on its own catalog and free port,
# their output printed after the tests' so nothing interleaves. Every test
# holds under a machine this loaded (docs/ci-time.md: the test stage twice
# under `stress-ng --cpu 2`). checkov needs only the chart and helm, and
# runs after the Rust tests: its ~10 s burst of Python at the stage's start
# landed on the autoscaler's end-to-end tests, the busiest worlds.
stage "unit, property and end-to-end tests; Schemathesis, the images and the browser tests beside them"
schemathesis_log="$(pwd)/build/schemathesis.log"
CATALOG_BIN="$(pwd)/target/debug/catalog" bash scripts/schemathesis.sh >"$schemathesis_log" 2>&1 &
schemathesis_pid=$!
images_log="$(pwd)/build/build-images.log"
bash scripts/build-images.sh >"$images_log" 2>&1 &
images_pid=$!
browser_log="$(pwd)/build/browser-tests.log"
browser_pid=""
if [ -f tests/browser/run.mjs ]; then
  CATALOG_BIN="$(pwd)/target/debug/catalog" node tests/browser/run.mjs >"$browser_log" 2>&1 &
  browser_pid=$!
fi

# Every test API server writes the calls it answered, with who made them,
# here; deploy-check then holds them against the RBAC in deploy/. Wiped
# first, so calls from an earlier run cannot stand in for this one's.
export KUBE_TEST_AUDIT_DIR="$(pwd)/build/kube-audit"
rm -rf "$KUBE_TEST_AUDIT_DIR"
mkdir -p "$KUBE_TEST_AUDIT_DIR"
tests_status=0
if cargo nextest --version >/dev/null 2>&1; then
  # Threads and the JUnit report (target/nextest/default/junit.xml):
  # .config/nextest.toml.
  cargo nextest run --workspace --locked --no-fail-fast || tests_status=$?
  cargo test --workspace --doc --locked || tests_status=$?
else
  cargo test --workspace --locked --no-fail-fast || tests_status=$?
fi

deploy_status=0
if [ "$tests_status" -eq 0 ]; then
  stage "deploy/: RBAC against the end-to-end tests' calls, images, container flags"
  # The binary the build stage made: `cargo run -p deploy-check` would resolve
  # features for that one package and compile ~40 s of dependencies again.
  target/debug/deploy-check --deploy deploy/kubernetes --audit build/kube-audit || deploy_status=$?
fi
unset KUBE_TEST_AUDIT_DIR

checkov_log="$(pwd)/build/checkov.log"
checkov_status=0
bash scripts/checkov.sh >"$checkov_log" 2>&1 || checkov_status=$?

browser_status=0
if [ -n "$browser_pid" ]; then
  wait "$browser_pid" || browser_status=$?
fi
schemathesis_status=0
wait "$schemathesis_pid" || schemathesis_status=$?
images_status=0
wait "$images_pid" || images_status=$?
if [ -n "$browser_pid" ]; then
  stage "browser tests' output (headless Chromium)"
  cat "$browser_log"
fi
stage "Schemathesis's output"
cat "$schemathesis_log"
stage "the images' output (deploy/docker/ built with buildah, run under unshare -r chroot)"
cat "$images_log"
stage "checkov's output (the chart, every component on: deploy/checkov/)"
cat "$checkov_log"

# What each crate cost to build and each test to run, for docs/ci-time.md.
stage "figures: build time per crate, test time per area"
timing_report=$(ls -t target/cargo-timings/cargo-timing-*.html 2>/dev/null | head -1 || true)
[ -n "$timing_report" ] && python3 scripts/ci-figures.py build "$timing_report" || true
[ -f target/nextest/default/junit.xml ] && python3 scripts/ci-figures.py tests target/nextest/default/junit.xml || true

if [ "$tests_status" -ne 0 ] || [ "$deploy_status" -ne 0 ] || [ "$browser_status" -ne 0 ] \
  || [ "$schemathesis_status" -ne 0 ] || [ "$images_status" -ne 0 ] \
  || [ "$checkov_status" -ne 0 ]; then
  echo "failed: Rust tests exit $tests_status, deploy-check exit $deploy_status," \
    "browser tests exit $browser_status, Schemathesis exit $schemathesis_status," \
    "images exit $images_status, checkov exit $checkov_status" >&2
  exit 1
fi

disk
stage "all tests passed"
