//! redmark's fuzz targets: one function per parser that sees untrusted bytes.
//!
//! Each drives the library's own entry points, the way the gateway calls them,
//! and asserts what must hold for any input; a panic (failed assertion,
//! overflow, index out of range, ...) is a finding. libFuzzer runs them
//! through `fuzz_targets/*.rs` (`cargo fuzz`, nightly); `tests/stable.rs` runs
//! the very same functions on stable over the committed corpus plus mutated
//! and random inputs. `scripts/fuzz.sh` picks the path.
//!
//! | target | drives | input |
//! |---|---|---|
//! | `request_state` | `mrtr::state::Keyring::open` (and `seal`) | a `requestState` token, or a payload signed with the fuzz key |
//! | `request` | `front::pipeline::parse_request` (step 6: body, protocol headers, `_meta`, `Mcp-Name`), `params::check` (`Mcp-Param-*`), `Keyring::open` on a continuation's state | HTTP head lines, a blank line, the body |
//! | `sse` | `sse::Decoder::feed`, `upstream::transport::http::{carries_message, message_from_body}` | an upstream SSE stream, cut into chunks |
//! | `framing` | `upstream::transport::stdio::{line_codec, message_from_line}`, `http::message_from_body`, `jsonrpc::Message` (and `Message::from_slice` against parsing a `Value` and classifying it; `jsonrpc::Relayable` against `Message::from_slice`) | a server's stdout, or an HTTP answer's body |
//! | `guard` | `mrtr::convert::question`, `policy::guard::check` | a server's pushed request params |
//! | `answer` | `convert::question`, `guard::check`, `convert::answer`, `policy::answer::judge`, `Question::mark` | a push, the client's answer, the call's arguments |
//! | `config` | `config::Config::parse` | a config file |
//! | `policy` | `policy::Policy::parse`, then its CEL rules | a policy file |
//! | `label` | `telemetry::labelled::shape` | a tool name or resource URI a client sent |
//! | `jwks` | `front::oauth::jwks::read_jwks` | an issuer's JWK set document |

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::missing_panics_doc)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio_util::codec::Decoder as _;

use redmark::config::{Config, ConfigErrors};
use redmark::front::pipeline::params;
use redmark::front::pipeline::protocol::decode_header_value;
use redmark::front::pipeline::{Halt, Incoming, parse_request};
use redmark::jsonrpc::{Id, Message};
use redmark::mrtr::convert;
use redmark::mrtr::state::{Key, Keyring, StateError};
use redmark::policy::Policy;
use redmark::policy::answer::{Judgement, Subject, judge};
use redmark::policy::guard::{self, Verdict};
use redmark::protocol::{Fault, Principal};
use redmark::sse;
use redmark::upstream::transport::{http as up_http, stdio};

/// A fuzz target: one input, any bytes; a panic is a finding.
pub type Target = fn(&[u8]);

/// Every target, by name (what `cargo fuzz run NAME` and `tests/stable.rs NAME` take).
pub const TARGETS: &[(&str, Target)] = &[
    ("request_state", request_state),
    ("request", request),
    ("sse", sse),
    ("framing", framing),
    ("guard", guard),
    ("answer", answer),
    ("config", config),
    ("policy", policy),
    ("label", label),
    ("jwks", jwks),
];

// ---------------------------------------------------------------- requestState

/// The fuzz keyring: `KEY_ID` signs, `OLD_ID` only verifies (rotation).
/// The committed `request_state` seeds are sealed with these.
pub const KEY_ID: &str = "fuzz-k1";
pub const KEY_SECRET: &[u8] = b"redmark fuzz signing key, 32 B!!";
pub const OLD_ID: &str = "fuzz-k0";
pub const OLD_SECRET: &[u8] = b"redmark fuzz retired key, 32 B!!";
/// The targets' clock (2027-01-15T08:00:00Z); seeds expire after it.
pub const NOW_SECS: u64 = 1_800_000_000;

pub fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(NOW_SECS)
}

pub fn keyring() -> &'static Keyring {
    static RING: OnceLock<Keyring> = OnceLock::new();
    RING.get_or_init(|| {
        Keyring::new(
            Key::new(KEY_ID, KEY_SECRET.to_vec()),
            vec![Key::new(OLD_ID, OLD_SECRET.to_vec())],
        )
    })
}

/// A token in the wire form `{kid}.{b64(payload)}.{b64(HMAC)}`, signed as the keyring would.
pub fn sign(kid: &str, secret: &[u8], payload: &[u8]) -> String {
    Keyring::new(Key::new(kid, secret.to_vec()), Vec::new()).seal_payload(payload)
}

/// First byte: bit 0 clear, the rest is a token as a client sent it; bit 0
/// set, the rest is a payload sealed here with the signing key (bit 1 clear)
/// or the retired one, to reach the claims parse behind the AEAD tag.
pub fn request_state(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let ring = keyring();
    let now = now();
    let signed_here = mode & 1 == 1;
    let token = if signed_here {
        let (kid, secret) = if mode & 2 == 0 {
            (KEY_ID, KEY_SECRET)
        } else {
            (OLD_ID, OLD_SECRET)
        };
        sign(kid, secret, rest)
    } else {
        // `requestState` is a JSON string: text.
        match std::str::from_utf8(rest) {
            Ok(t) => t.to_owned(),
            Err(_) => return,
        }
    };
    let opened = ring.open(&token, now);
    if signed_here {
        assert!(
            !matches!(
                opened,
                Err(StateError::UnknownKey | StateError::BadSignature)
            ),
            "a state signed with a key of the ring failed verification: {opened:?}"
        );
    }
    if let Ok(claims) = opened {
        assert_eq!(claims.v, redmark::mrtr::state::CLAIMS_VERSION);
        assert!(claims.exp > NOW_SECS, "an expired state opened");
        let again = ring
            .open(&ring.seal(&claims), now)
            .expect("what the keyring seals, it opens");
        assert_eq!(again, claims);
    }
}

// ---------------------------------------------------------------- 2026 request

/// Splits `name: value` lines, a blank line, then the body (as on the wire).
/// Without a blank line the whole input is the body. Names repeat freely.
pub fn http_head(data: &[u8]) -> (HeaderMap, &[u8]) {
    let mut headers = HeaderMap::new();
    let Some(end) = data.windows(2).position(|w| w == b"\n\n") else {
        return (headers, data);
    };
    for line in data[..end].split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let value = line[colon + 1..].trim_ascii_start();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(line[..colon].trim_ascii()),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    (headers, &data[end + 2..])
}

fn texts<'h>(headers: &'h HeaderMap, name: &str) -> impl Iterator<Item = &'h str> {
    headers.get_all(name).iter().map(|v| {
        v.to_str()
            .expect("accepted headers are visible ASCII")
            .trim()
    })
}

/// Step 6 on one request: what is accepted mirrors every value of its
/// headers; what is refused is the client's fault, with a 4xx.
pub fn request(data: &[u8]) {
    let (headers, body) = http_head(data);
    match parse_request(&headers, body) {
        Ok(Incoming::Notification(method)) => assert!(!method.is_empty() || body.len() > 2),
        // 2025-era only when the client opens so: `initialize`, or a session
        // (or a 2025-era version) named in the headers.
        Ok(Incoming::Era2025(message)) => {
            let in_session = headers.contains_key("mcp-session-id")
                || headers
                    .get("mcp-protocol-version")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| redmark::protocol::LEGACY_VERSIONS.contains(&v.trim()));
            match &*message {
                redmark::front::era2025::Message2025::Request(e) => {
                    assert!(in_session || e.method == "initialize", "{e:?}");
                }
                other => assert!(in_session, "{other:?}"),
            }
        }
        Ok(Incoming::Request(req)) => {
            for v in texts(&headers, "mcp-method") {
                assert_eq!(v, req.method.as_str());
            }
            for v in texts(&headers, "mcp-protocol-version") {
                assert_eq!(v, req.ctx.protocol_version);
            }
            if req.method.name_param().is_some() {
                for v in texts(&headers, "mcp-name") {
                    assert_eq!(decode_header_value(v).unwrap(), req.target());
                }
            }
            // Step 10 holds `Mcp-Param-*` to a tool's `x-mcp-header` annotations:
            // what passes has one value per mirrored header, and one for each body value.
            if params::check(mirrored(), &req.param_headers, req.arguments()).is_ok() {
                for m in mirrored() {
                    let name = format!("mcp-param-{}", m.header.to_ascii_lowercase());
                    let sent: Vec<_> = req
                        .param_headers
                        .iter()
                        .filter(|(k, _)| *k == name)
                        .collect();
                    assert!(sent.windows(2).all(|w| w[0] == w[1]), "{sent:?}");
                    let (first, rest) = m.path.split_first().unwrap();
                    let body = rest
                        .iter()
                        .try_fold(req.arguments().get(first), |v, k| Some(v?.get(k)))
                        .flatten()
                        .filter(|v| !v.is_null());
                    assert!(body.is_none() || !sent.is_empty(), "{name} missing");
                }
            }
            // A continuation's state goes to the keyring next.
            if let Some(state) = req.params.get("requestState").and_then(Value::as_str) {
                let _ = keyring().open(state, now());
            }
        }
        Err(Halt::Refuse(r)) => {
            assert_eq!(r.reject.fault(), Fault::Client, "{r:?}");
            assert!(r.reject.status().is_client_error(), "{r:?}");
            let _ = r.reject.response(r.id.as_ref()).to_string();
        }
        Err(other) => panic!("parse_request halted without a refusal: {other:?}"),
    }
}

/// The `x-mcp-header` annotations the `request` target checks `Mcp-Param-*`
/// against (src/front/pipeline/params.rs's test schema).
fn mirrored() -> &'static [params::Mirrored] {
    static MIRRORED: OnceLock<Vec<params::Mirrored>> = OnceLock::new();
    MIRRORED.get_or_init(|| {
        params::mirrored(&json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}}},
            "title": {"type": "string", "x-mcp-header": "Title"},
        }}))
    })
}

// ---------------------------------------------------------------- upstream

/// Cuts `data` into chunks of 1 to 16 bytes chosen by `seed` (xorshift).
fn chunks(data: &[u8], seed: u8) -> Vec<&[u8]> {
    let mut state = u32::from(seed) | 0x9e37_0000;
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (state % 16 + 1) as usize;
        let (head, tail) = rest.split_at(n.min(rest.len()));
        out.push(head);
        rest = tail;
    }
    out
}

/// A message survives being written and read again.
fn round_trips(msg: &Message) {
    assert_eq!(
        Message::from_value(msg.to_value()).as_ref(),
        Ok(msg),
        "{msg:?}"
    );
    if let Message::Request { id, .. } | Message::Response { id, .. } = msg {
        assert_eq!(Id::from_value(&id.to_value()).as_ref(), Some(id));
    }
}

/// The largest event the `sse` target's decoders accept: small, so the bound is reached.
pub const SSE_MAX_EVENT: usize = 4096;

/// First byte: how the stream is cut. The events must not depend on the cut,
/// and each message event is read as the HTTP transport reads it.
pub fn sse(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let whole = sse::Decoder::new(SSE_MAX_EVENT).feed(stream);
    let mut decoder = sse::Decoder::new(SSE_MAX_EVENT);
    let mut cut = Ok(Vec::new());
    for chunk in chunks(stream, seed) {
        match decoder.feed(chunk) {
            Ok(events) => cut.as_mut().unwrap().extend(events),
            Err(e) => {
                cut = Err(e);
                break;
            }
        }
    }
    if let (Ok(a), Ok(b)) = (&whole, &cut) {
        assert_eq!(a, b, "the events depend on how the stream is cut");
    }
    for event in whole.iter().flatten() {
        assert!(event.data.len() <= SSE_MAX_EVENT);
        if up_http::carries_message(event)
            && let Ok(msg) = up_http::message_from_body(event.data.as_bytes())
        {
            round_trips(&msg);
        }
    }
}

/// The line bound of the `framing` target's codec: small, so it is reached.
pub const MAX_LINE: usize = 1024;

fn stdio_lines<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Option<Vec<bytes::Bytes>> {
    let mut codec = stdio::line_codec(MAX_LINE);
    let mut buf = BytesMut::new();
    let mut lines = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        // An error ends the link, as in the stdio reader.
        while let Some(line) = codec.decode(&mut buf).ok()? {
            lines.push(line);
        }
    }
    while let Some(line) = codec.decode_eof(&mut buf).ok()? {
        lines.push(line);
    }
    Some(lines)
}

/// First byte: how the stream is cut. A server's stdout read line by line
/// (the same lines however it is cut), and the same bytes as one HTTP body.
pub fn framing(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let whole = stdio_lines([stream]);
    let cut = stdio_lines(chunks(stream, seed));
    if let (Some(a), Some(b)) = (&whole, &cut) {
        assert_eq!(a, b, "the lines depend on how stdout is cut");
    }
    for line in whole.iter().flatten() {
        assert!(line.len() <= MAX_LINE);
        if let Some(Ok(msg)) = stdio::message_from_line(line) {
            round_trips(&msg);
        }
    }
    if let Ok(msg) = up_http::message_from_body(stream) {
        round_trips(&msg);
    }
    reads_as_a_value_does(stream);
    relays_what_it_reads(stream);
}

/// `Relayable::from_slice` keeps a result as text and reads everything
/// else as `Message::from_slice` does. Where the message path reads the
/// result, the text is that result; the message path may refuse what the
/// text keeps only for the result's own content (a `Value` cannot hold it:
/// the relay passes it on, see `jsonrpc::payload`).
fn relays_what_it_reads(bytes: &[u8]) {
    use redmark::jsonrpc::{Payload, Relayable};
    let relayed = Relayable::from_slice(bytes);
    let read = Message::from_slice(bytes);
    match (relayed, read) {
        (
            Ok(Relayable::Response { id, outcome }),
            Ok(Message::Response {
                id: m_id,
                outcome: m,
            }),
        ) => {
            assert_eq!(id, m_id, "the relay read another id");
            match (outcome, m) {
                (Ok(Payload::Text(text)), Ok(value)) => {
                    let reread: Value =
                        serde_json::from_str(text.get()).expect("the text is the result");
                    assert_eq!(reread, value, "the text is another result");
                }
                (Ok(Payload::Tree(a)), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => assert_eq!(a, b),
                (a, b) => panic!("the relay and the message path disagree: {a:?} vs {b:?}"),
            }
        }
        (Ok(Relayable::Message(a)), Ok(b)) => assert_eq!(a, b, "the relay read another message"),
        (Err(_), Err(_)) => {}
        (
            Ok(Relayable::Response {
                outcome: Ok(Payload::Text(text)),
                ..
            }),
            Err(_),
        ) => {
            // Only a result a `Value` cannot hold may be kept where the message path refuses.
            assert!(
                serde_json::from_str::<Value>(text.get()).is_err(),
                "the relay kept a result the message path refuses for another reason"
            );
        }
        (a, b) => panic!("the relay and the message path disagree: {a:?} vs {b:?}"),
    }
}

/// `Message::from_slice` reads the members without a tree of the message;
/// its verdict must be the one of parsing a `Value` and classifying it.
fn reads_as_a_value_does(bytes: &[u8]) {
    use redmark::jsonrpc::ReadError;
    let by_value = serde_json::from_slice::<Value>(bytes).map(Message::from_value);
    match (by_value, Message::from_slice(bytes)) {
        (Ok(Ok(a)), Ok(b)) => assert_eq!(a, b, "from_slice read another message"),
        (Ok(Err(a)), Err(ReadError::Framing { error, .. })) => {
            assert_eq!(a, error, "from_slice gave another framing error");
        }
        (Err(_), Err(ReadError::Json(_))) => {}
        (a, b) => panic!("from_slice and the Value path disagree: {a:?} vs {b:?}"),
    }
}

// ---------------------------------------------------------------- policy

/// The policy the `guard` and `answer` targets judge with, besides the repo's own.
pub const FUZZ_POLICY: &str = include_str!("../policies/fuzz.toml");

/// The policies the `guard` and `answer` targets pick from: the repo's
/// `policies/`, the fuzz policy (rules of every kind), and the default.
pub fn policies() -> &'static [Policy] {
    static POLICIES: OnceLock<Vec<Policy>> = OnceLock::new();
    POLICIES.get_or_init(|| {
        vec![
            Policy::parse(include_str!("../../policies/rooms.toml"), "rooms.toml").unwrap(),
            Policy::parse(FUZZ_POLICY, "fuzz.toml").unwrap(),
            Policy::parse(
                include_str!("../../policies/conformance.toml"),
                "conformance.toml",
            )
            .unwrap(),
            Policy::default(),
        ]
    })
}

/// Tool names the targets ask for (the policies' tools, and one none has).
pub const TOOLS: &[&str] = &[
    "book_room",
    "create_ticket",
    "create_invoice",
    "book_meeting",
    "sign_up",
    "transfer",
    "test_input_required_result_elicitation",
    "unknown_tool",
];

const METHODS: [&str; 4] = [
    "elicitation/create",
    "elicitation/create",
    "sampling/createMessage",
    "roots/list",
];

/// Which policy, tool, method and question count the first two bytes pick.
struct Pick {
    policy: &'static Policy,
    tool: &'static str,
    method: &'static str,
    asked: usize,
    groups: Vec<String>,
}

fn pick(data: &[u8]) -> Option<(Pick, &[u8])> {
    let [a, b, rest @ ..] = data else {
        return None;
    };
    let policies = policies();
    Some((
        Pick {
            policy: &policies[usize::from(a & 3) % policies.len()],
            method: METHODS[usize::from((a >> 2) & 3)],
            asked: 1 + usize::from(a >> 4),
            tool: TOOLS[usize::from(b & 7)],
            groups: if b & 8 == 0 {
                vec![]
            } else {
                vec!["facilities".into(), "finance".into()]
            },
        },
        rest,
    ))
}

/// Bytes 0–1: policy, method, question count, tool. The rest: the params of
/// the request the server pushed (JSON). Read as a question, then guarded.
pub fn guard(data: &[u8]) {
    let Some((p, rest)) = pick(data) else {
        return;
    };
    let Ok(params) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let Ok((q, params)) = convert::question_and_params(Id::Number(1), p.method, Some(params))
    else {
        return;
    };
    // The text the question holds gives back the params it was made from.
    assert_eq!(
        q.request().get("params").cloned().unwrap_or(Value::Null),
        params
    );
    match guard::check(p.policy, p.tool, p.method, &params, p.asked) {
        Verdict::Ask => {
            assert!(p.asked <= p.policy.max_questions(p.tool));
            let schema = q.schema();
            if let Some(props) = schema
                .as_ref()
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
                && p.policy.defaults.deny_secrets
            {
                for (name, prop) in props {
                    assert!(
                        !guard::looks_secret(name, prop),
                        "asked for a secret: {name}"
                    );
                }
            }
        }
        Verdict::Refuse(r) => assert!(r.reason.as_str().starts_with("policy_"), "{r:?}"),
        Verdict::ModelOwned { field, guidance } => {
            let owned = &p.policy.tool(p.tool).unwrap().model_owned;
            assert!(owned.contains(&field));
            assert!(guidance.contains(&field));
        }
    }
}

/// Bytes 0–1: policy, tool, the caller's groups (the method is always a
/// form). The rest: `{"push": params, "answer": response, "arguments": {...}}`.
/// Production order: the question is guarded; only a question that is asked
/// gets an answer, which is checked for shape and then judged; an invalid one
/// is asked again with a red mark.
pub fn answer(data: &[u8]) {
    let Some((p, rest)) = pick(data) else {
        return;
    };
    let Ok(Value::Object(input)) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let push = input.get("push").cloned();
    let Ok((mut q, params)) =
        convert::question_and_params(Id::Number(1), "elicitation/create", push)
    else {
        return;
    };
    if guard::check(p.policy, p.tool, "elicitation/create", &params, 1) != Verdict::Ask {
        return;
    }
    let response = input.get("answer").cloned().unwrap_or(Value::Null);
    let Ok(given) = convert::answer(&q, &response) else {
        return;
    };
    let (Some(schema), Some(content)) =
        (q.schema(), given.get("content").and_then(Value::as_object))
    else {
        return;
    };
    let principal = Principal::new("alice", p.groups.clone());
    let arguments = input.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let subject = Subject {
        principal: &principal,
        tool: p.tool,
        arguments: &arguments,
    };
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    match judge(p.policy, &subject, &schema, content) {
        Judgement::Valid(forwarded) => {
            for key in forwarded.keys() {
                assert!(props.contains_key(key), "`{key}` was not asked for");
            }
        }
        Judgement::Invalid { field, mark, .. } => {
            let rules = p.policy.tool(p.tool).and_then(|t| t.fields.get(&field));
            let sensitive = rules.is_some_and(|r| r.sensitive)
                || props
                    .get(&field)
                    .is_some_and(|prop| guard::looks_secret(&field, prop));
            if sensitive && let Some(value) = content.get(&field) {
                assert!(
                    !mark.contains(&format!("{value} was given")),
                    "a sensitive value in a red mark: {mark}"
                );
            }
            q.mark(&mark);
        }
        Judgement::Denied { .. } => {}
        // A rule that fails at run time is a refusal (policy_error), never a
        // crash; it only ever judges a field that was asked and answered.
        Judgement::Error { field, .. } => {
            assert!(props.contains_key(&field), "`{field}` was not asked for");
        }
    }
}

// ---------------------------------------------------------------- files

/// Where the `config` target's relative paths resolve (the rooms example, so
/// its `policy = "../../policies/rooms.toml"` exists).
fn config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/rooms")
}

fn check_errors(errors: &ConfigErrors, text: &str) {
    assert!(!errors.0.is_empty(), "an error without a problem");
    for e in &errors.0 {
        assert!(e.line <= text.lines().count() + 1, "{e} is past the end");
        let _ = e.to_string();
    }
}

/// A config file: checked, or every problem located in it.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::parse(text, "fuzz.toml", config_dir()) {
        Ok(c) => {
            let _ = (c.listen_addr(), c.admin_addr());
            for route in &c.routes {
                let _ = route.get_ref().target(&c.base_dir);
            }
        }
        Err(e) => check_errors(&e, text),
    }
}

/// A policy file: compiled, or every problem located; then each compiled CEL
/// rule runs on a few answers (an operator's rule must not panic either).
pub fn policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let policy = match Policy::parse(text, "fuzz.toml") {
        Ok(p) => p,
        Err(e) => return check_errors(&e, text),
    };
    let principal = Principal::new("alice", vec!["facilities".into()]);
    let values = [
        json!("atrium"),
        json!(3),
        json!(-1.5),
        json!(true),
        json!(["a", "b"]),
    ];
    for (tool, rules) in &policy.tools {
        let _ = (
            policy.keys(tool),
            policy.max_questions(tool),
            policy.on_invalid(tool),
        );
        for field in rules.fields.keys() {
            let schema = json!({"type": "object", "properties": {field.as_str(): {}}});
            let subject = Subject {
                principal: &principal,
                tool,
                arguments: &json!({"n": 1}),
            };
            for value in &values {
                let mut content = Map::new();
                content.insert(field.clone(), value.clone());
                let _ = judge(&policy, &subject, &schema, &content);
            }
        }
    }
}

// ---------------------------------------------------------------- metric labels

/// A tool name or resource URI, as a client sent it, shaped into a metric
/// label: never longer than the bound, the same for the same value, kept
/// whole when it fits, else a prefix of it and `~` with 16 hex digits.
pub fn label(data: &[u8]) {
    use redmark::telemetry::labelled::{MAX_LABEL_BYTES, shape};
    let value = String::from_utf8_lossy(data);
    let shaped = shape(&value);
    assert!(shaped.len() <= MAX_LABEL_BYTES, "{} bytes", shaped.len());
    assert_eq!(shape(&value), shaped, "not stable");
    if value.len() <= MAX_LABEL_BYTES {
        assert_eq!(shaped, value, "a value that fits was changed");
    } else {
        let (prefix, hash) = shaped
            .rsplit_once('~')
            .expect("a cut value ends with ~hash");
        assert!(value.starts_with(prefix), "not a prefix of the value");
        assert_eq!(hash.len(), 16);
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{hash}");
    }
}

// ---------------------------------------------------------------- JWKS

/// An issuer's JWK set: read member by member; a document without a `keys`
/// array is refused, and otherwise every member is kept, skipped (and
/// named), or left out by design (encryption and symmetric keys).
pub fn jwks(data: &[u8]) {
    use redmark::front::oauth::jwks::read_jwks;
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let members = doc.get("keys").and_then(Value::as_array).map(Vec::len);
    match read_jwks(doc) {
        Ok(read) => {
            let members = members.expect("a set read without a keys array");
            assert!(read.len() + read.skipped.len() <= members.min(64));
            let kids = read.kids();
            assert!(kids.windows(2).all(|w| w[0] < w[1]), "{kids:?}");
            for s in &read.skipped {
                assert!(s.index < members.min(64), "{s}");
                assert!(s.kid.as_ref().is_none_or(|k| k.chars().count() <= 64));
                let _ = s.to_string();
            }
        }
        Err(_) => assert!(members.is_none(), "a keys array refused"),
    }
}
