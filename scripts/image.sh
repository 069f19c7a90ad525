#!/usr/bin/env bash
# Builds the redmark container image with Debian's buildah, from scratch: no
# base image is pulled from any registry. The image holds only
#   /usr/local/bin/redmark            the release binary
#   the shared libraries it links     as `ldd` lists them, at the same paths,
#                                     and the dynamic loader
#   /etc/ssl/certs/ca-certificates.crt  the CA roots (redmark's HTTPS clients,
#                                     to upstreams, JWKS and OTLP, verify
#                                     against the platform's store)
#   /etc/passwd, /etc/group           one user, redmark, uid/gid 65532
# It runs as USER 65532:65532, exposes 8080 (MCP) and 9464 (admin: /healthz,
# /readyz, /metrics), and takes its config and keys as volumes:
# /etc/redmark (redmark.toml, policies, TLS files; read-only) and
# /var/lib/redmark (an audit log or access log file, when configured).
# Secrets such as REDMARK_STATE_KEY_K1 come in as environment variables.
#
# Usage: scripts/image.sh [--binary PATH] [--tag NAME:TAG] [--rootfs DIR]
#                         [--no-image] [--smoke]
#   --binary  the redmark binary to pack (default: `cargo build --release`)
#   --tag     the image name (default: redmark:<version from Cargo.toml>)
#   --rootfs  assemble the root filesystem here and keep it (default: a
#             temporary directory)
#   --no-image  assemble and check the root filesystem only
#   --smoke   after building, start redmark from what was packed and check
#             that /healthz answers 200: in the image (buildah run) where
#             this machine can run containers, and from the root filesystem
#             with chroot as uid 65532 in any case (root only)
# buildah (and crun, to run it) are installed from Debian when missing, as
# root, with no service started (scripts/apt-without-services.sh).
# The last line printed says what ran: `image: built NAME` /
# `smoke: rootfs ok`, `smoke: image ok (buildah run --isolation oci|chroot)`
# or `smoke: image skipped (...)`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[image] %s\n' "$*" >&2; }

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
binary="" tag="redmark:$version" rootfs="" build_image=1 smoke=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --binary) binary="$2"; shift 2 ;;
        --tag) tag="$2"; shift 2 ;;
        --rootfs) rootfs="$2"; shift 2 ;;
        --no-image) build_image=0; shift ;;
        --smoke) smoke=1; shift ;;
        *) echo "usage: scripts/image.sh [--binary PATH] [--tag NAME:TAG] [--rootfs DIR] [--no-image] [--smoke]" >&2; exit 2 ;;
    esac
done

if [[ -z "$binary" ]]; then
    log "cargo build --release"
    cargo build --release --locked --bin redmark >&2
    binary="${CARGO_TARGET_DIR:-target}/release/redmark"
fi
[[ -x "$binary" ]] || { log "no binary at $binary"; exit 1; }

work="$(mktemp -d)"
cleanup() {
    [[ -n "${smoke_pid:-}" ]] && kill "$smoke_pid" 2>/dev/null && wait "$smoke_pid" 2>/dev/null
    [[ -n "${ctr:-}" ]] && buildah rm "$ctr" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT
if [[ -z "$rootfs" ]]; then rootfs="$work/rootfs"; fi
rm -rf "$rootfs"
mkdir -p "$rootfs"/{usr/local/bin,etc/ssl/certs,etc/redmark,var/lib/redmark,tmp}
chmod 1777 "$rootfs/tmp"

# --- the root filesystem --------------------------------------------------
install -m 0755 "$binary" "$rootfs/usr/local/bin/redmark"
# Every library the binary links, at the path the loader looks for it
# (symlinks resolved, so the file itself is packed), and the loader named in
# the binary (`/lib64/ld-linux-x86-64.so.2` on amd64).
libs="$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')"
[[ -n "$libs" ]] || { log "ldd found no libraries in $binary (static? then none are needed)"; }
for lib in $libs; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
    log "packed $lib"
done
ca=/etc/ssl/certs/ca-certificates.crt
[[ -s "$ca" ]] || { log "no $ca: install Debian's ca-certificates"; exit 1; }
cp -L "$ca" "$rootfs$ca"
printf 'redmark:x:65532:65532:redmark:/var/lib/redmark:/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'redmark:x:65532:\n' > "$rootfs/etc/group"
chown 65532:65532 "$rootfs/var/lib/redmark"
mkdir -p "$rootfs/usr/share/doc/redmark"
cp LICENSE-MIT LICENSE-APACHE "$rootfs/usr/share/doc/redmark/"

# The packed loader and libraries are enough: run the binary with nothing
# from the host (chroot), or, without root, through the packed loader.
if [[ $EUID -eq 0 ]]; then
    packed_version="$(chroot "$rootfs" /usr/local/bin/redmark --version)"
else
    loader="$(ldd "$binary" | awk '$1 ~ /^\// { print $1 }')"
    packed_version="$("$rootfs$loader" --library-path "$rootfs/lib/x86_64-linux-gnu:$rootfs/usr/lib/x86_64-linux-gnu" "$rootfs/usr/local/bin/redmark" --version)"
fi
log "rootfs: $(du -sh "$rootfs" | cut -f1) in $rootfs; runs: $packed_version"

# --- smoke: redmark from the rootfs, as uid 65532, /healthz -----------------
# A config as the Deployment's ConfigMap gives it, in /etc/redmark.
smoke_config() { # dir
    sed -n '/^  redmark.toml: |$/,$p' examples/deploy/kubernetes/configmap.yaml | tail -n +2 | sed 's/^    //' > "$1/redmark.toml"
}
state_key() { python3 -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode())'; }
# Waits for "redmark admin on http://ADDR" in $1, then GETs /healthz.
check_healthz() { # log-file what
    local addr="" i
    for i in $(seq 1 100); do
        addr="$(sed -n 's|^redmark admin on http://||p' "$1" 2>/dev/null | head -1 || true)"
        [[ -n "$addr" ]] && break
        if ! kill -0 "$smoke_pid" 2>/dev/null; then break; fi
        sleep 0.1
    done
    if [[ -z "$addr" ]]; then log "$2: redmark did not start:"; cat "$1" >&2; return 1; fi
    local code
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/healthz" || true)"
    log "$2: GET http://$addr/healthz -> $code"
    [[ "$code" == 200 ]]
}
smoke_rootfs() {
    [[ $EUID -eq 0 ]] || { echo "smoke: rootfs skipped (chroot needs root)"; return 0; }
    smoke_config "$rootfs/etc/redmark"
    REDMARK_STATE_KEY_K1="$(state_key)" chroot --userspec=65532:65532 "$rootfs" \
        /usr/local/bin/redmark serve --config /etc/redmark/redmark.toml \
        --listen 127.0.0.1:0 --admin 127.0.0.1:0 > "$work/rootfs.log" 2>&1 &
    smoke_pid=$!
    check_healthz "$work/rootfs.log" "rootfs (chroot, uid 65532)"
    kill "$smoke_pid"; wait "$smoke_pid" 2>/dev/null || true; smoke_pid=""
    rm -f "$rootfs/etc/redmark/redmark.toml"
    echo "smoke: rootfs ok"
}

if [[ $build_image -eq 0 ]]; then
    [[ $smoke -eq 1 ]] && smoke_rootfs
    exit 0
fi

# --- the image --------------------------------------------------------------
if ! command -v buildah >/dev/null 2>&1; then
    [[ $EUID -eq 0 ]] || { log "buildah is not installed and installing it needs root"; exit 1; }
    log "installing buildah and crun from Debian"
    # shellcheck source=apt-without-services.sh
    source "$ROOT/scripts/apt-without-services.sh"
    apt_install_without_services buildah crun
fi
# vfs: works wherever buildah does (no overlay mount needed in a container).
export STORAGE_DRIVER="${STORAGE_DRIVER:-vfs}"
ctr="$(buildah from scratch)"
buildah copy --quiet "$ctr" "$rootfs" / >/dev/null
buildah config \
    --user 65532:65532 \
    --workingdir /var/lib/redmark \
    --port 8080 --port 9464 \
    --volume /etc/redmark --volume /var/lib/redmark \
    --env SSL_CERT_FILE="$ca" \
    --entrypoint '["/usr/local/bin/redmark"]' \
    --cmd '["serve", "--config", "/etc/redmark/redmark.toml"]' \
    --label org.opencontainers.image.title=redmark \
    --label org.opencontainers.image.version="$version" \
    --label org.opencontainers.image.licenses="MIT OR Apache-2.0" \
    --label org.opencontainers.image.description="An elicitation-aware MCP gateway" \
    "$ctr"
buildah commit --quiet "$ctr" "$tag" >/dev/null
log "image: $tag, $(buildah images --format '{{.Size}}' "$tag" | head -1)"
buildah rm "$ctr" >/dev/null; ctr=""

if [[ $smoke -eq 1 ]]; then
    smoke_rootfs
    # The image itself, where this machine can run a container.
    cfg="$work/config"; mkdir -p "$cfg"; smoke_config "$cfg"
    ctr="$(buildah from "$tag")"
    # The OCI runtime (crun) first; where it cannot make the container's
    # namespaces and cgroups (inside another container), buildah's chroot
    # isolation, which still runs the image's own filesystem, user and mounts.
    isolation=""
    for try in oci chroot; do
        if buildah run --isolation "$try" --network host "$ctr" -- /usr/local/bin/redmark --version > "$work/probe-$try.log" 2>&1; then
            isolation="$try"; break
        fi
        log "buildah run --isolation $try: $(grep -m1 -i error "$work/probe-$try.log" || tail -1 "$work/probe-$try.log")"
    done
    echo "image: built $tag"
    if [[ -z "$isolation" ]]; then
        echo "smoke: image skipped (this machine cannot run a container)"
        exit 0
    fi
    buildah run --isolation "$isolation" --network host --volume "$cfg:/etc/redmark:ro" \
        --env REDMARK_STATE_KEY_K1="$(state_key)" "$ctr" -- \
        /usr/local/bin/redmark serve --config /etc/redmark/redmark.toml \
        --listen 127.0.0.1:0 --admin 127.0.0.1:0 > "$work/image.log" 2>&1 &
    smoke_pid=$!
    check_healthz "$work/image.log" "image (buildah run --isolation $isolation)"
    kill "$smoke_pid"; wait "$smoke_pid" 2>/dev/null || true; smoke_pid=""
    echo "smoke: image ok (buildah run --isolation $isolation)"
    exit 0
fi
echo "image: built $tag"
