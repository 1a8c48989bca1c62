#!/usr/bin/env bash
# Installs everything the test suite needs beyond the Rust toolchain, into
# places the project owns (build/), so a fresh machine needs nothing else:
#   - SecantusDB, a MongoDB-compatible server, for the MongoDB store tests
#     (run as a separate process, never linked into the project);
#   - Schemathesis and openapi-spec-validator (same virtualenv), for the
#     catalog's OpenAPI document (scripts/schemathesis.sh);
#   - Debian's Chromium, for the browser tests;
#   - Debian's strace, for tests that prove what a process never did (bind
#     a port) or did before answering (fsync the store);
#   - util-linux's unshare, to run a controller on the in-cluster
#     configuration in a mount namespace of its own;
#   - the browser tests' node packages (playwright-core, axe-core; never a downloaded browser).
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mkdir -p build

step() { printf '==> %s\n' "$*"; }

# --- SecantusDB (PyPI) into a project-local virtualenv -----------------------
venv="$root/build/venv"
if [ ! -x "$venv/bin/secantusd-py" ]; then
  step "installing SecantusDB into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'SecantusDB==0.7.0b3'
fi
"$venv/bin/secantusd-py" --help >/dev/null 2>&1 || { echo "secantusd-py does not run" >&2; exit 1; }

# --- Schemathesis and an OpenAPI validator (PyPI), same virtualenv ---------
# Pinned: the checks' exact rules change between releases. Nothing is
# fetched at test time.
if [ "$("$venv/bin/st" --version 2>/dev/null)" != "st, version 4.32.5" ] \
  || ! "$venv/bin/python" -c 'import openapi_spec_validator' 2>/dev/null; then
  step "installing Schemathesis and openapi-spec-validator into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    'schemathesis==4.32.5' 'openapi-spec-validator==0.9.0'
fi

# --- Chromium (Debian) for the browser tests ---------------------------------
if [ ! -x /usr/bin/chromium ]; then
  step "installing Debian's chromium"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# --- strace (Debian) for the tests that trace system calls ------------------
if ! command -v strace >/dev/null 2>&1; then
  step "installing Debian's strace"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq strace >/dev/null
fi

# --- unshare (Debian's util-linux) for the in-cluster configuration test -----
if ! command -v unshare >/dev/null 2>&1; then
  step "installing Debian's util-linux (unshare)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq util-linux >/dev/null
fi

# --- node packages of the browser tests --------------------------------------
if [ -f tests/browser/package.json ]; then
  if [ ! -d tests/browser/node_modules/playwright-core ] || [ ! -d tests/browser/node_modules/axe-core ]; then
    step "installing the browser tests' node packages"
    # The browser comes from Debian; never let a package fetch its own.
    (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
step "test dependencies ready"
