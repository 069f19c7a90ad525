#!/usr/bin/env bash
# Checks the deployment examples in examples/deploy/:
#   - the Kubernetes manifests against the Kubernetes schemas, with PyPI
#     `kubernetes-validate` (installed into a venv under .cache/, or
#     $REDMARK_DEPLOY_VENV), strict: unknown fields are errors;
#   - the systemd unit with `systemd-analyze verify`, where it is available
#     (its ExecStart binary replaced by one that exists here);
#   - the ConfigMap's redmark.toml with `redmark check`, when a redmark
#     binary is built.
# Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KV_VERSION=1.37.0
venv="${REDMARK_DEPLOY_VENV:-.cache/venv-deploy}"
if [[ ! -x "$venv/bin/kubernetes-validate" ]] || ! "$venv/bin/pip" show kubernetes-validate 2>/dev/null | grep -q "^Version: $KV_VERSION$"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KV_VERSION"
fi
echo "kubernetes-validate $KV_VERSION: examples/deploy/kubernetes/*.yaml"
"$venv/bin/kubernetes-validate" --strict examples/deploy/kubernetes/*.yaml

if command -v systemd-analyze >/dev/null 2>&1; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    # verify insists that ExecStart's binary exists; /bin/true stands in for /usr/local/bin/redmark.
    sed 's|/usr/local/bin/redmark|/bin/true|g' examples/deploy/redmark.service > "$tmp/redmark.service"
    echo "systemd-analyze verify: examples/deploy/redmark.service"
    out="$(systemd-analyze verify "$tmp/redmark.service" 2>&1 || true)"
    # Only what concerns the unit itself (a container has no running systemd).
    problems="$(printf '%s\n' "$out" | grep -F 'redmark.service' || true)"
    if [[ -n "$problems" ]]; then
        printf '%s\n' "$problems"
        exit 1
    fi
else
    echo "systemd-analyze not available: the systemd unit is not verified"
fi

redmark="${CARGO_TARGET_DIR:-target}/debug/redmark"
if [[ -x "$redmark" ]]; then
    tmp_cfg="$(mktemp -d)"
    # The ConfigMap's one file, unindented.
    sed -n '/^  redmark.toml: |$/,$p' examples/deploy/kubernetes/configmap.yaml | tail -n +2 | sed 's/^    //' > "$tmp_cfg/redmark.toml"
    echo "redmark check: the ConfigMap's redmark.toml"
    # `check` refuses what `serve` would, an unset key variable included: give
    # it what the Secret gives the pod (a fresh key, as `redmark keygen` makes).
    REDMARK_STATE_KEY_K1="$(python3 -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode())')" \
        "$redmark" check --config "$tmp_cfg/redmark.toml"
    rm -rf "$tmp_cfg"
fi
