#!/usr/bin/env python3
"""Regenerates the seed corpus in fuzz/corpus/ from real traffic.

    python3 fuzz/seeds.py      (after `cargo build --bins --examples` and
                                scripts/setup-test-deps.sh; takes ~20 s)

What each target's seeds are made of (every file is one libFuzzer input; the
first byte(s) of some targets select options, see fuzz/src/lib.rs):

  request        HTTP heads + bodies of the 2026-07-28 requests the tests' peer
                 clients (tests/peers/py_client.py, PyPI mcp 2.3.0, and
                 ts_client.mjs, npm @modelcontextprotocol/client) send to redmark
                 in front of the rooms example, recorded by a proxy; continuations
                 carry the requestState redmark sealed. Plus the pipeline unit
                 tests' own cases (duplicate headers, base64 Mcp-Name, batches).
  request_state  the requestState tokens redmark sealed in those runs (its
                 [[state.keys]] is the fuzz key of fuzz/src/lib.rs), tampered
                 as tests/mrtr_state.rs tampers them, and their claims payloads.
  sse            raw response bodies of legacy Streamable HTTP servers: the tests'
                 FastMCP fixture (tests/fixtures/legacy_server.py: CRLF line
                 endings, progress and log notifications) and server-everything.
  framing        stdout transcripts of the stdio servers the tests run: the rooms
                 example (rmcp), tests/fixtures/mrtr_server.py and policy_server.py
                 (FastMCP), answering their pushed questions.
  guard          the params of every question those servers pushed.
  answer         those pushes with the answers the tests give them.
  config         examples/*/redmark.toml and the configs of the tests.
  policy         policies/*.toml, fuzz/policies/fuzz.toml and the tests' policies.

Files named `regression-*` are the inputs of past findings (added by hand,
each with a regression test in the library); regenerating keeps them.
"""

import base64
import hashlib
import http.client
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
CACHE = ROOT / ".cache"
LEGACY_PY = CACHE / "venv-legacy" / "bin" / "python"
CLIENT_PY = CACHE / "venv-client" / "bin" / "python"
ROOMS = ROOT / "target" / "debug" / "examples" / "rooms"
REDMARK = ROOT / "target" / "debug" / "redmark"
# fuzz/src/lib.rs KEY_ID / KEY_SECRET
KEY_ID = "fuzz-k1"
KEY_SECRET = b"redmark fuzz signing key, 32 B!!"
OLD_ID = "fuzz-k0"
OLD_SECRET = b"redmark fuzz retired key, 32 B!!"

seeds: dict[str, dict[str, bytes]] = {}


def seed(target: str, data: bytes) -> None:
    """Adds one input, named by its content like libFuzzer names corpus files."""
    seeds.setdefault(target, {})[hashlib.sha1(data).hexdigest()] = data


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


# ------------------------------------------------------------ stdio servers


class Stdio:
    """Drives a stdio server line by line, keeping every byte of its stdout."""

    def __init__(self, argv: list[str]):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.out = b""
        self.pushes: list[tuple[str, dict, dict]] = []  # method, params, the answer given

    def send(self, msg: dict) -> None:
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def read(self) -> dict:
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit("the server closed its stdout")
        self.out += line
        return json.loads(line)

    def init(self, capabilities: dict) -> None:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities,
            "clientInfo": {"name": "redmark-seeds", "version": "0"}}})
        self.read()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        while "result" not in self.read():
            pass

    def call(self, id_: int, tool: str, arguments: dict, answers: list) -> None:
        """Calls a tool, answering its pushed questions in order."""
        self.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        while True:
            m = self.read()
            if "method" in m and "id" in m:
                answer = answers.pop(0) if answers else {"action": "cancel"}
                self.pushes.append((m["method"], m.get("params") or {}, answer))
                self.send({"jsonrpc": "2.0", "id": m["id"], "result": answer})
            elif m.get("id") == id_:
                return

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


ROOM_ANSWERS = [
    ("book_room", {"day": "2026-09-17", "hour": 10, "room_hint": "the big room"},
     [{"action": "accept", "content": {"room_id": "studio-b"}}]),
    ("book_room", {"day": "2026-09-18", "hour": 9, "room_hint": "a room"},
     [{"action": "accept", "content": {"room_id": "atrium"}}, {"action": "accept", "content": {"choice": "nook"}}]),
    ("create_ticket", {"title": "Projector broken"}, [{"action": "accept", "content": {"priority": 3}}]),
    ("create_invoice", {"customer": "ACME", "amount": 120}, [{"action": "accept", "content": {"currency": "EUR"}}]),
    ("book_meeting", {"start": "2026-09-17T10:00:00Z"}, [{"action": "decline"}]),
]

POLICY_SCHEMAS = [  # tests/policy_guard.rs and policy_answers.rs
    {"name": {"type": "string"}},
    {"address": {"type": "object", "properties": {"country": {"type": "string"}}}},
    {"ok": {"type": "string"}, "tags": {"type": "array", "items": {"type": "object"}}},
    {"maybe": {"type": ["string", "null"]}},
    {"r": {"$ref": "#/$defs/x"}},
    {"password": {"type": "string"}},
    {"user": {"type": "string"}, "apiKey": {"type": "string"}},
    {"db": {"type": "string", "title": "Database password"}},
    {"pin": {"type": "string", "format": "password"}},
    {"card_number": {"type": "string"}},
    {"tokens_used": {"type": "integer"}},
    {"tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2}},
    {"c": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]}},
    {"email": {"type": "string", "format": "email"}, "when": {"type": "string", "format": "date"}},
    {"priority": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3}},
    {"title": {"type": "string", "minLength": 3, "maxLength": 80}, "agree": {"type": "boolean"}},
]


def stdio_traffic() -> None:
    rooms = Stdio([str(ROOMS)])
    rooms.init({"elicitation": {}})
    for i, (tool, args, answers) in enumerate(ROOM_ANSWERS):
        rooms.call(10 + i, tool, args, list(answers))
    rooms.close()

    mrtr = Stdio([str(LEGACY_PY), str(ROOT / "tests/fixtures/mrtr_server.py")])
    mrtr.init({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": True}})
    mrtr.call(10, "ask", {"tag": "a1"}, [{"action": "accept", "content": {"name": "Ada"}}])
    mrtr.call(11, "sample", {"tag": "s1"}, [{"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}])
    mrtr.call(12, "roots", {"tag": "r1"}, [{"roots": [{"uri": "file:///work", "name": "work"}]}])
    mrtr.call(13, "url_ask", {"tag": "u1"}, [{"action": "accept"}])
    mrtr.close()

    policy = Stdio([str(LEGACY_PY), str(ROOT / "tests/fixtures/policy_server.py")])
    policy.init({"elicitation": {"form": {}, "url": {}}})
    for i, props in enumerate(POLICY_SCHEMAS):
        schema = {"type": "object", "properties": props, "required": list(props)[:1]}
        content = {k: ("x" if v.get("type") == "string" else 3) for k, v in props.items() if isinstance(v, dict)}
        policy.call(20 + i, "ask", {"schema": json.dumps(schema), "tag": f"p{i}"}, [{"action": "accept", "content": content}])
    policy.call(40, "ask_url", {"url": "https://auth.example.com/login", "tag": "u1"}, [{"action": "accept"}])
    policy.call(41, "ask_url", {"url": "http://evil.example/", "tag": "u2"}, [{"action": "decline"}])
    policy.close()

    for server in (rooms, mrtr, policy):
        transcript = server.out
        seed("framing", b"\x00" + transcript)
        seed("framing", b"\x07" + transcript.replace(b"\n", b"\r\n"))
        for line in transcript.splitlines()[:6]:
            seed("framing", b"\x03" + line + b"\n")
            seed("framing", b"\x00" + line)  # an HTTP JSON body is one message without the newline
        for n, (method, params, _) in enumerate(server.pushes):
            body = json.dumps(params).encode()
            # byte 0: policy (bits 0-1), method (2-3), asked-1 (4-7); byte 1: tool, groups
            m = {"elicitation/create": 0, "sampling/createMessage": 2, "roots/list": 3}[method]
            for policy_ix, tool_ix in ((0, 0), (1, 4), (1, 5), (0, 3), (3, 7)):
                seed("guard", bytes([policy_ix | (m << 2) | ((n % 4) << 4), tool_ix]) + body)
    # Answers, as the tests give them, to the pushes they answer.
    for server in (rooms, policy):
        for method, params, answer in server.pushes:
            if method != "elicitation/create":
                continue
            for policy_ix, tool_ix in ((0, 0), (1, 0), (1, 4), (0, 8 | 0), (1, 1), (1, 5)):
                body = json.dumps({"push": params, "answer": answer, "arguments": {"limit": 50}}).encode()
                seed("answer", bytes([policy_ix, tool_ix]) + body)


# ------------------------------------------------------------ legacy HTTP servers


def post(port: int, path: str, body: dict, headers: dict) -> tuple[dict, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    c.request("POST", path, json.dumps(body), h)
    r = c.getresponse()
    data = r.read()
    got = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return got, data


def http_traffic() -> None:
    def session(port: int, calls: list[tuple[str, dict]]) -> None:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "redmark-seeds", "version": "0"}}}
        h, body = post(port, "/mcp", init, {})
        seed("sse", b"\x00" + body)
        sid = {"mcp-session-id": h["mcp-session-id"]} if "mcp-session-id" in h else {}
        sid["mcp-protocol-version"] = "2025-06-18"
        post(port, "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        for i, (method, params) in enumerate(calls):
            _, body = post(port, "/mcp", {"jsonrpc": "2.0", "id": i + 1, "method": method, "params": params}, sid)
            for cut in (0x00, 0x2a, 0x95):
                seed("sse", bytes([cut]) + body)

    port = free_port()
    fastmcp = subprocess.Popen([str(LEGACY_PY), str(ROOT / "tests/fixtures/legacy_server.py"), "--http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        session(port, [("tools/list", {}), ("tools/call", {"name": "progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "p1"}}),
                       ("tools/call", {"name": "log", "arguments": {"level": "warning", "text": "héllo\nworld"}}),
                       ("tools/call", {"name": "whoami", "arguments": {}}), ("tools/call", {"name": "nope", "arguments": {}})])
    finally:
        fastmcp.kill()
        fastmcp.wait()

    everything = CACHE / "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    if everything.exists() and shutil.which("node"):
        port = free_port()
        node = subprocess.Popen(["node", str(everything), "streamableHttp"], env={**os.environ, "PORT": str(port)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            session(port, [("tools/list", {}), ("tools/call", {"name": "echo", "arguments": {"message": "hi"}}),
                           ("prompts/list", {}), ("resources/list", {})])
        finally:
            node.kill()
            node.wait()


# ------------------------------------------------------------ redmark itself


class Recorder(http.server.BaseHTTPRequestHandler):
    """Forwards to redmark, keeping each request's head and body."""

    upstream = 0
    requests: list[bytes] = []
    bodies: list[bytes] = []
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        head = "".join(f"{k.lower()}: {v}\n" for k, v in self.headers.items()
                       if k.lower() not in ("host", "content-length", "connection", "accept-encoding", "user-agent"))
        Recorder.requests.append(head.encode() + b"\n" + body)
        c = http.client.HTTPConnection("127.0.0.1", Recorder.upstream, timeout=30)
        c.request("POST", self.path, body, {k: v for k, v in self.headers.items() if k.lower() != "host"})
        r = c.getresponse()
        data = r.read()
        Recorder.bodies.append(data)
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def gateway_traffic() -> list[str]:
    """Requests the peer clients send through redmark, and the states it seals."""
    tmp = Path(tempfile.mkdtemp())
    gw_port, proxy_port = free_port(), free_port()
    config = f"""[server]
listen = "127.0.0.1:{gw_port}"

[[state.keys]]
id = "{KEY_ID}"
secret = "{b64(KEY_SECRET)}"
sign = true

[mrtr]
# Long-lived states, so they are still valid on the fuzz targets' clock.
ttl = "3650days"

[[route]]
name = "rooms"
path = "/mcp/rooms"
policy = "{ROOT / 'policies/rooms.toml'}"

[route.upstream]
command = ["{ROOMS}"]
"""
    (tmp / "redmark.toml").write_text(config)
    gw = subprocess.Popen([str(REDMARK), "serve", "--config", str(tmp / "redmark.toml")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    Recorder.upstream = gw_port
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", proxy_port), Recorder)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{proxy_port}/mcp/rooms"
    try:
        wait_port(gw_port)
        script = {"steps": [
            {"op": "discover"}, {"op": "list_tools"}, {"op": "list_resources"}, {"op": "list_prompts"},
            {"op": "call_tool", "name": "list_rooms", "arguments": {}},
            {"op": "call_tool", "name": "book_room", "arguments": {"day": "2026-09-17", "hour": 10, "room_hint": "the big room"}},
            {"op": "call_tool", "name": "create_ticket", "arguments": {"title": "Projector broken"}},
            {"op": "call_tool", "name": "create_ticket", "arguments": {"title": "Löwe ümlaut"}, "meta": {"progressToken": "t-1"}},
            {"op": "call_tool", "name": "book_meeting", "arguments": {"start": "2026-09-17T10:00:00Z"}},
        ], "elicitation": [
            {"action": "accept", "content": {"room_id": "studio-b"}},
            {"action": "accept", "content": {"priority": 9}},
            {"action": "accept", "content": {"priority": 3}},
            {"action": "decline"},
        ]}
        subprocess.run([str(CLIENT_PY), str(ROOT / "tests/peers/py_client.py"), url, json.dumps(script)],
                       check=True, capture_output=True, timeout=120)
        ts = ROOT / "tests/peers/ts_client.mjs"
        if shutil.which("node"):
            ts_script = {"steps": script["steps"][:2] + script["steps"][5:7], "elicitation": script["elicitation"][:2] + [{"action": "cancel"}]}
            subprocess.run(["node", str(ts), url, json.dumps(ts_script)], capture_output=True, timeout=120)
    finally:
        proxy.shutdown()
        gw.kill()
        gw.wait()
        shutil.rmtree(tmp)
    for r in Recorder.requests:
        seed("request", r)
    for body in Recorder.bodies:
        seed("sse", b"\x11" + body)  # redmark's own SSE framing is SSE too
    states = set()
    for body in Recorder.bodies:
        for line in body.decode(errors="replace").splitlines():
            line = line.removeprefix("data: ")
            if '"requestState"' in line:
                try:
                    states.add(json.loads(line)["result"]["requestState"])
                except (ValueError, KeyError, TypeError):
                    pass
    return sorted(states)


# ------------------------------------------------------------ synthetic, from the unit tests


META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "redmark-tests", "version": "0"}}


def req(headers: list[tuple[str, str]], body) -> bytes:
    text = body if isinstance(body, (bytes, str)) else json.dumps(body)
    text = text.encode() if isinstance(text, str) else text
    return "".join(f"{k}: {v}\n" for k, v in headers).encode() + b"\n" + text


def unit_test_requests() -> None:
    """The shapes of src/front/pipeline/tests.rs and tests/front_rules.rs."""
    base = [("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28")]
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": META, "name": "héllo", "arguments": {}}}
    seed("request", req(base + [("mcp-method", "tools/call"), ("mcp-name", "=?base64?aMOpbGxv?=")], call))
    seed("request", req(base + [("mcp-method", "tools/call"), ("mcp-name", "=?base64?!!!?=")], call))
    dup = dict(call, params=dict(call["params"], name="delete_everything"))
    seed("request", req(base + [("mcp-method", "tools/call"), ("mcp-name", "delete_everything"), ("mcp-name", "read_file")], dup))
    seed("request", req(base + [("mcp-protocol-version", "2025-06-18"), ("mcp-method", "tools/list")],
                        {"jsonrpc": "2.0", "id": "s", "method": "tools/list", "params": {"_meta": META}}))
    seed("request", req(base + [("mcp-method", "resources/read"), ("mcp-name", "file:///a b")],
                        {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"_meta": META, "uri": "file:///a b"}}))
    seed("request", req(base + [("mcp-method", "initialize")], {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"_meta": META}}))
    seed("request", req(base + [("mcp-method", "tools/list")],
                        {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": dict(META, **{"io.modelcontextprotocol/logLevel": "loud"})}}))
    seed("request", req(base + [("mcp-method", "x")], b"{nope"))
    seed("request", req(base + [("mcp-method", "x")], b"[]"))
    seed("request", req(base, {"jsonrpc": "2.0", "id": 1, "result": {}}))
    seed("request", req([], {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}))
    # 2025-era messages (src/front/era2025, tests/era2025_sessions.rs): an
    # initialize, and in a session a call, an answer and a cancellation.
    plain = base[:2]
    session = plain + [("mcp-session-id", "k1.AAAA"), ("mcp-protocol-version", "2025-11-25")]
    seed("request", req(plain, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "c", "version": "1"}}}))
    seed("request", req(session, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                  "params": {"name": "book_room", "arguments": {"room_hint": "the big room"}, "_meta": {"progressToken": 1}}}))
    seed("request", req(session, {"jsonrpc": "2.0", "id": "redmark.k1.AAAA", "result": {"action": "accept", "content": {"room_id": "nook"}}}))
    seed("request", req(session, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}))
    seed("request", req(base + [("mcp-method", "tools/call"), ("mcp-name", "transfer"), ("mcp-param-region", "=?base64?dXMtd2VzdDE=?="), ("mcp-param-limit", "42.0")],
                        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"_meta": META, "name": "transfer", "arguments": {"region": "us-west1", "opts": {"limit": 42}}}}))


def claims(op: str, exp: int, rd: int = 1, tc: str | None = None) -> bytes:
    """Claims as mrtr/start.rs seals them (field order of `Claims`)."""
    pr = hashlib.sha256(b"redmark-principal\0rooms\0anonymous").hexdigest()
    rq = hashlib.sha256(b"redmark-request\0rooms\0tools/call\0" + b'"book_room"\0{"day":"2026-09-17"}').hexdigest()
    c = {"v": 1, "op": op, "node": "node-1", "pr": pr, "exp": exp, "rq": rq, "rd": rd, "m": "hold"}
    if tc:
        c["tc"] = tc
    return json.dumps(c, separators=(",", ":")).encode()


def sign(kid: str, secret: bytes, payload: bytes) -> str:
    import hmac
    signed = f"{kid}.{b64(payload)}"
    return f"{signed}.{b64(hmac.new(secret, signed.encode(), hashlib.sha256).digest())}"


def state_seeds(real: list[str]) -> None:
    # byte 0: bit 0 clear = a token as sent; set = a payload signed in the harness (bit 1: the retired key)
    fresh = claims("5f2b6c0d9e8a7b1c2d3e4f5061728394", 2_000_000_000)
    tokens = list(real) + [
        sign(KEY_ID, KEY_SECRET, fresh),
        sign(OLD_ID, OLD_SECRET, claims("00112233445566778899aabbccddeeff", 2_000_000_000, 2,
                                        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")),
        sign(KEY_ID, KEY_SECRET, claims("5f2b6c0d9e8a7b1c2d3e4f5061728394", 1_700_000_000)),  # expired
        sign("other", KEY_SECRET, fresh),  # unknown key
    ]
    for t in list(tokens):
        kid, payload, mac = t.split(".")
        first = "B" if mac.startswith("A") else "A"
        tokens += [f"{kid}.{payload}.{first}{mac[1:]}", f"{kid}.{payload}", f"{t}.x", f"{kid}.{payload}.{mac}=="]
    for t in tokens:
        seed("request_state", b"\x00" + t.encode())
    for t in real[:4]:
        payload = base64.urlsafe_b64decode(t.split(".")[1] + "==")
        seed("request_state", b"\x01" + payload)
        seed("request_state", b"\x03" + payload)
    seed("request_state", b"\x01" + fresh)
    seed("request_state", b"\x01" + fresh.replace(b'"v":1', b'"v":2'))
    seed("request_state", b"\x01" + fresh[:-1] + b',"extra":0}')


def file_seeds() -> None:
    for f in sorted((ROOT / "examples").glob("*/redmark.toml")):
        seed("config", f.read_bytes())
    tests_cfg = [  # src/config/tests.rs GOOD, tests/common, src/app_tests.rs, tests/mrtr_state.rs, observability
        (ROOT / "src/config/tests.rs").read_text().split('const GOOD: &str = r#"')[1].split('"#;')[0],
        '[server]\nlisten = "127.0.0.1:0"\nadmin = "127.0.0.1:0"\n\n[[route]]\nname = "main"\npath = "/mcp"\n[route.upstream]\nurl = "http://127.0.0.1:9/mcp"\n',
        '[server]\nlisten = "127.0.0.1:0"\n[audit]\npath = "/tmp/missing-dir/audit.jsonl"\n[[route]]\nname = "r"\npath = "/mcp"\n[route.upstream]\ncommand = ["true"]\n',
        f'[server]\nlisten = "127.0.0.1:0"\n[[state.keys]]\nid = "k1"\nsecret = "{b64(KEY_SECRET)}"\nsign = true\n[[state.keys]]\nid = "k0"\nsecret_env = "REDMARK_OLD_KEY"\n[[route]]\nname = "main"\npath = "/mcp"\n[route.upstream]\ncommand = ["python3", "server.py"]\n',
        '[server]\nlisten = "127.0.0.1:0"\nmax_body_bytes = 1024\nallowed_origins = ["https://app.example.com"]\nshutdown_grace = "2s"\nsse_keepalive = "15s"\n[telemetry]\notlp_endpoint = "http://127.0.0.1:4317"\notlp_protocol = "grpc"\nservice_name = "redmark-grpc-test"\n[mrtr]\nttl = "1m"\nmax_rounds = 4\ngather = "20ms"\nmax_pending_per_principal = 2\n[[route]]\nname = "rooms"\npath = "/mcp/rooms"\npolicy = "../../policies/rooms.toml"\non_missing_capability = "decline"\n[route.upstream]\ncommand = ["../../target/debug/examples/rooms"]\ninit_timeout = "5s"\ncall_timeout = "30s"\nmax_message_bytes = 65536\n[route.pool]\nmax_sessions = 4\nmax_sessions_per_principal = 1\nidle_timeout = "1m"\nlease_timeout = "2s"\n[route.cache]\nttl = "30s"\nscope = "private"\n',
    ]
    for text in tests_cfg:
        seed("config", text.encode())
    for f in sorted((ROOT / "policies").glob("*.toml")) + [ROOT / "fuzz/policies/fuzz.toml"]:
        seed("policy", f.read_bytes())
    issue = (ROOT / "src/policy/tests/mod.rs").read_text().split('const ISSUE_EXAMPLE: &str = r#"')[1].split('"#;')[0]
    seed("policy", issue.encode())
    seed("policy", b'[tool.a.fields.b]\npattern = "(unclosed"\nminimum = 5\nmaximum = 1\nauthz = "value +"\n')


def label_and_jwks_seeds() -> None:
    """Issue 42's parsers: label shaping (tool names and URIs as clients send
    them, short, at the bound, long, multi-byte) and JWK sets member by member
    (a good key beside a numeric kid, an unknown kty, an encryption key)."""
    for value in [
        "book_room",
        "x" * 128,
        "x" * 129,
        "demo://resource/static/document/" + "a" * 4096 + ".md",
        "é" * 100,
        "file:///" + "日本" * 50,
        "",
    ]:
        seed("label", value.encode())
    okp = {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "good", "alg": "EdDSA", "use": "sig"}
    rsa = {"kty": "RSA", "kid": "rsa", "alg": "RS256", "use": "sig", "e": "AQAB",
           "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}
    sets = [
        {"keys": [okp]},
        {"keys": [okp, dict(okp, kid=42)]},
        {"keys": [rsa, {"kty": "XYZ", "kid": "strange"}, dict(rsa, kid="enc", use="enc", alg="RSA-OAEP")]},
        {"keys": [dict(okp, x="not base64 !"), {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}]},
        {"keys": []},
        {"keys": {}},
        {},
    ]
    for doc in sets:
        seed("jwks", json.dumps(doc).encode())


def main() -> None:
    for need in (ROOMS, REDMARK, LEGACY_PY, CLIENT_PY):
        if not need.exists():
            raise SystemExit(f"missing {need}: run `cargo build --bins --examples` and scripts/setup-test-deps.sh")
    stdio_traffic()
    http_traffic()
    real_states = gateway_traffic()
    if not real_states:
        raise SystemExit("redmark sealed no requestState: the capture went wrong")
    unit_test_requests()
    state_seeds(real_states)
    file_seeds()
    label_and_jwks_seeds()
    for target, inputs in sorted(seeds.items()):
        d = CORPUS / target
        d.mkdir(parents=True, exist_ok=True)
        # `regression-*` files are the inputs of past findings, added by hand: kept.
        for old in d.iterdir():
            if not old.name.startswith("regression-"):
                old.unlink()
        for name, data in inputs.items():
            (d / name).write_bytes(data)
        print(f"{target}: {len(inputs)} seeds, {sum(map(len, inputs.values()))} bytes")


if __name__ == "__main__":
    sys.exit(main())
