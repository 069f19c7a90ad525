# Sourced by the profile scripts: the one-route redmark config they run the
# gateway with, in front of the fast upstream.
#
#   bench_config FILE PORT UPSTREAM_PORT
#
# The pool as `scripts/bench.sh` sizes it (benches/relay.rs): a server that
# has never pushed keeps its sessions one operation each, and the default of
# 16 sessions per principal would leave half of wrk's 32 connections waiting
# for a lease (woken across event loops as each call gives its session back),
# which measures the pool's limit, not the relay.
bench_config() {
    cat > "$1" <<TOML
[server]
listen = "127.0.0.1:$2"
[[route]]
name = "bench"
path = "/mcp"
[route.upstream]
url = "http://127.0.0.1:$3/mcp"
[route.pool]
max_sessions = 64
max_sessions_per_principal = 64
TOML
}
