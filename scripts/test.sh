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
disk() { df -h . | awk 'NR==2 {print "disk: " $4 " free of " $2}'; }
disk

stage "installing test dependencies"
bash scripts/install-test-deps.sh

stage "checking formatting"
cargo fmt --all -- --check
# A dev-dependency that changes a shared crate's features makes the test
# stage compile half the dependency tree again: refused here, in seconds.
python3 scripts/check-features.py

stage "building every binary"
cargo build --workspace --bins --locked

stage "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

stage "unit, property and end-to-end tests"
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
cargo run -p deploy-check --locked -- --deploy deploy/kubernetes --audit build/kube-audit
unset KUBE_TEST_AUDIT_DIR

stage "Schemathesis against the catalog's OpenAPI document"
CATALOG_BIN="$(pwd)/target/debug/catalog" bash scripts/schemathesis.sh

if [ -f tests/browser/run.mjs ]; then
  stage "browser tests (headless Chromium)"
  CATALOG_BIN="$(pwd)/target/debug/catalog" node tests/browser/run.mjs
fi

disk
stage "all tests passed"
