# Sourced by the profile scripts: the one-route redmark config they run the
# gateway with, in front of the fast upstream.
#
#   bench_config FILE PORT UPSTREAM_PORT
bench_config() {
    cat > "$1" <<TOML
[server]
listen = "127.0.0.1:$2"
[[route]]
name = "bench"
path = "/mcp"
[route.upstream]
url = "http://127.0.0.1:$3/mcp"
TOML
}
