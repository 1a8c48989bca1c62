#!/usr/bin/env bash
# Schemathesis against the real catalog: validates the OpenAPI document as
# OpenAPI 3.1 (openapi-spec-validator), then runs `st run --checks all`
# (examples, coverage, fuzzing and the stateful phase that follows the
# document's links) once per role: provider, consumer and admin bearer
# tokens, and the Open Service Broker platform account on /v2.
#
# Needs: target/debug/catalog (or CATALOG_BIN) and build/venv with
# schemathesis and openapi-spec-validator (scripts/install-test-deps.sh).
# Talks to 127.0.0.1 only. Settings: tests/schemathesis/schemathesis.toml.
# ST_MAX_EXAMPLES (default 10) and ST_SEED (default 20261123) tune the run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin=${CATALOG_BIN:-$root/target/debug/catalog}
venv=$root/build/venv
st=$venv/bin/st
py=$venv/bin/python
max_examples=${ST_MAX_EXAMPLES:-10}
seed=${ST_SEED:-20261123}

[ -x "$bin" ] || { echo "schemathesis: no catalog binary at $bin (cargo build -p catalog)" >&2; exit 1; }
[ -x "$st" ] || { echo "schemathesis: $st missing (bash scripts/install-test-deps.sh)" >&2; exit 1; }

work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
admin_secret="st-admin-$("$py" -c 'import secrets; print(secrets.token_hex(16))')"
osb_user=st-platform
osb_pass="st-osb-$("$py" -c 'import secrets; print(secrets.token_hex(16))')"

# A fresh data directory; --demo seeds a provider with offers, so requests
# can reach real offers and plans (the document's examples name them).
# Schemathesis sends wrong credentials on purpose, thousands of times, to
# check every operation refuses them (401/403); the per-address limiter on
# secret checks (tested end to end in catalog_hostile) would answer 429
# instead, so it is set out of reach here.
CATALOG_ADMIN_SECRET="$admin_secret" CATALOG_OSB_PASSWORD="$osb_pass" \
  "$bin" --listen "127.0.0.1:$port" --data-dir "$work/data" --demo \
  --osb-username "$osb_user" --auth-rate-limit 1000000 --log warn >"$work/catalog.out" 2>"$work/catalog.log" &
pid=$!

ready=""
for _ in $(seq 1 100); do
  if "$py" -c "import urllib.request, sys; urllib.request.urlopen('$base/readyz', timeout=1)" 2>/dev/null; then
    ready=1
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
if [ -z "$ready" ]; then
  echo "schemathesis: the catalog did not become ready" >&2
  cat "$work/catalog.log" >&2
  exit 1
fi

# The document must be valid OpenAPI 3.1 before anything is generated from it.
"$py" - "$base" <<'EOF'
import json, sys, urllib.request
from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV31SpecValidator

doc = json.load(urllib.request.urlopen(sys.argv[1] + "/openapi.json"))
assert doc["openapi"].startswith("3.1"), doc["openapi"]
validate(doc, cls=OpenAPIV31SpecValidator)
ops = sum(1 for item in doc["paths"].values() for m in item if m in ("get", "put", "post", "delete", "patch"))
print(f"openapi.json: valid OpenAPI {doc['openapi']}, {len(doc['paths'])} paths, {ops} operations")
EOF

# Tokens: provider (POST /authenticate), admin (the secret), consumer (an
# admin issues it).
tokens=$("$py" - "$base" "$admin_secret" <<'EOF'
import json, sys, urllib.request

base, admin_secret = sys.argv[1], sys.argv[2]

def post(path, body, token=None):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", "Bearer " + token)
    return json.load(urllib.request.urlopen(req))["token"]

provider = post("/authenticate", {"clusterID": "st-provider", "clusterName": "Schemathesis provider",
                                  "authURL": "https://st-provider.example:443", "token": "st-provider-peering-token"})
admin = post("/authenticate/admin", {"secret": admin_secret})
consumer = post("/consumer-tokens", {"subject": "st-consumer", "name": "Schemathesis consumer"}, admin)
print(provider, consumer, admin)
EOF
)
read -r provider_token consumer_token admin_token <<<"$tokens"

# --exclude-path /subscribe: a WebSocket endpoint. Its 101 answer hands the
# connection over to the feed, which an HTTP request/response tool cannot
# follow; the document describes its handshake and the feed has its own
# end-to-end tests (tests/feed*).
# --exclude-path /contract-changes: a stream (NDJSON) that answers 200 and
# then stays open for as long as the token lasts, so every request would
# end in the request timeout; its answers are checked by
# catalog/tests/contract_changes.rs and the e2e catalog_contract_changes.
common=(
  --checks all
  --max-examples "$max_examples"
  --seed "$seed"
  --generation-database none
  # One worker: CPython 3.11's ast module is not thread-safe, and
  # Hypothesis parses lambdas with it (a "Runtime Error" under 2 workers).
  --workers 1
  --request-timeout 10
  --exclude-path /subscribe
  --exclude-path /contract-changes
  --no-color
  --output-truncate true
)

run() {
  local who=$1
  shift
  printf '\n==> schemathesis as %s\n' "$who"
  "$st" --config-file tests/schemathesis/schemathesis.toml run "$base/openapi.json" "${common[@]}" "$@"
}

start=$(date +%s)
failed=0
# The admin runs last: it may disable providers, which the others need.
# use_after_free is left out of the consumer and admin runs only: there
# DELETE /reservations/{id} (release) and DELETE /purchases/{id} (cancel)
# succeed, and they are state transitions that keep the record readable by
# design (documented), which the check takes for a resource still served
# after deletion. The provider and platform runs keep it, for
# DELETE /offer/{id} and the OSB deletions.
run provider -H "Authorization: Bearer $provider_token" || failed=1
run consumer -H "Authorization: Bearer $consumer_token" --exclude-checks use_after_free || failed=1
run "OSB platform (basic auth, /v2 only)" --include-path-regex '^/v2/' -a "$osb_user:$osb_pass" || failed=1
run admin -H "Authorization: Bearer $admin_token" --exclude-checks use_after_free || failed=1
echo "schemathesis: $(( $(date +%s) - start )) s"

if [ "$failed" -ne 0 ]; then
  echo "schemathesis: failures (catalog log follows)" >&2
  tail -n 50 "$work/catalog.log" >&2
  exit 1
fi
if grep -q "panicked" "$work/catalog.log"; then
  echo "schemathesis: the catalog panicked" >&2
  cat "$work/catalog.log" >&2
  exit 1
fi
echo "schemathesis: all checks passed"
