#!/usr/bin/env bash
# Runs redmark in front of the rooms example (a legacy, push-style MCP server
# over stdio) on http://127.0.0.1:8080/mcp/rooms; admin on 127.0.0.1:9464.
#
#   scripts/example.sh          run the gateway (Ctrl-C to stop)
#   scripts/example.sh --demo   run it, show a round trip with curl, stop
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Not --quiet: a first build compiles about 420 crates and is silent for
# minutes otherwise, which reads as a hang.
if [[ ! -x target/debug/redmark ]]; then
    echo "==> first build of redmark and the rooms example (cargo build --bin redmark --example rooms):"
    echo "    about 420 crates, typically 3 to 5 minutes on a laptop; later builds take seconds"
else
    echo "==> building redmark and the rooms example (cargo build --bin redmark --example rooms)"
fi
cargo build --bin redmark --example rooms
CONFIG=examples/rooms/redmark.toml

if [[ "${1:-}" != "--demo" ]]; then
    exec target/debug/redmark serve --config "$CONFIG"
fi

LOG=target/redmark-demo.log
# The demo starts from the example's seed bookings (bk-1, bk-2).
rm -f target/rooms-state.json
target/debug/redmark serve --config "$CONFIG" --listen 127.0.0.1:0 --admin 127.0.0.1:0 >/tmp/redmark-demo.$$ 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -f /tmp/redmark-demo.$$' EXIT
for _ in $(seq 100); do
    ADDR=$(grep -o 'http://[0-9.:]*' /tmp/redmark-demo.$$ | head -1 || true)
    [[ -n "$ADDR" ]] && break
    sleep 0.1
done
URL="$ADDR/mcp/rooms"
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
post() { # method name body
    curl -sS "$URL" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2026-07-28' -H "Mcp-Method: $1" ${2:+-H "Mcp-Name: $2"} -d "$3"
    echo
}
echo "--- server/discover"
post server/discover "" '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{'"$META"'}}'
echo "--- tools/list"
post tools/list "" '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{'"$META"'}}'
echo "--- tools/call book_room \"nook\" (unambiguous: no question needed)"
post tools/call book_room '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"book_room","arguments":{"day":"2026-09-18","hour":11,"room_hint":"nook"},'"$META"'}}'

# The round trip this gateway exists for: the rooms server pushes a question
# mid-call; redmark returns it as an InputRequiredResult; the client retries
# with the answer and the requestState it was given.
ELICIT_META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}'
ARGS='"name":"book_room","arguments":{"day":"2026-09-17","hour":9,"room_hint":"the big room"}'
state_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["requestState"])'; }
echo "--- tools/call book_room \"the big room\" (ambiguous: the server asks which room)"
R1=$(post tools/call book_room '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{'"$ARGS"','"$ELICIT_META"'}}')
echo "$R1"
echo "--- retry with the answer: studio-b (taken at 09:00, so the server asks again)"
R2=$(post tools/call book_room '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{'"$ARGS"',"inputResponses":{"room":{"action":"accept","content":{"room_id":"studio-b"}}},"requestState":"'"$(echo "$R1" | state_of)"'",'"$ELICIT_META"'}}')
echo "$R2"
echo "--- retry with the alternative: nook"
post tools/call book_room '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{'"$ARGS"',"inputResponses":{"alternative":{"action":"accept","content":{"choice":"nook"}}},"requestState":"'"$(echo "$R2" | state_of)"'",'"$ELICIT_META"'}}'

echo "--- what the questions cost people (redmark report --audit target/rooms-audit.jsonl)"
kill -TERM $PID 2>/dev/null || true
wait $PID 2>/dev/null || true
target/debug/redmark report --audit target/rooms-audit.jsonl || true
echo "--- the gateway's own log ($LOG)"
cat "$LOG"
