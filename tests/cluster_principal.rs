//! A forwarded request is judged with the whole principal the receiving
//! replica authenticated, scopes, issuer and subject included (issue 47,
//! item 4): three
//! replicas share a state key and a cluster secret, and a field rule over
//! `principal.scopes` refuses a capped caller's answer whichever replica it
//! lands on, and lets an uncapped caller's through. For a native server's
//! relayed task (the rmcp conformance fixture over HTTP, one server behind
//! every replica; a `tasks/update` away from the relaying replica is
//! forwarded to it and judged there) and for a hold-mode retry (the
//! policy fixture, which asks the form it is given; the retry is forwarded
//! to the replica holding the call).

// A test may panic (that is how it fails).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
// Only the authorization server of the OAuth tests' support.
#[allow(dead_code)]
mod oauth_support;
mod policy_support;

use common::*;
use oauth_support::Idp;
use policy_support::{ask, asked, schema};
use serde_json::{Value, json};
use tokio::process::Command;

const CAPPED: &str = "key-carol-capped-0123456789";
const FREE: &str = "key-dan-free-0123456789";
const FORWARDED: &str = r#"redmark_forwarded_retries_total{route="main",outcome="forwarded"}"#;
const RECEIVED: &str = r#"redmark_forwards_received_total{route="main"}"#;

/// carol holds the `capped` scope, dan none; both in one group.
fn principals() -> String {
    let key = |key: &str, principal: &str, scopes: &str| {
        format!(
            "[[auth.api_key]]\nsha256 = \"{}\"\nprincipal = \"{principal}\"\ngroups = [\"ops\"]\nscopes = [{scopes}]\n",
            redmark::config::key_digest_hex(key)
        )
    };
    key(CAPPED, "carol", "\"capped\"") + &key(FREE, "dan", "")
}

/// What every replica shares, in its top level after `[server]`'s keys.
fn cluster_top(node: &str, state: &str, cluster: &str) -> String {
    format!(
        "node_id = \"{node}\"\n{}\n[[state.keys]]\nid = \"k1\"\nsecret = \"{state}\"\nsign = true\n\n\
         [cluster]\nlisten = \"127.0.0.1:0\"\nsecret = \"{cluster}\"\n",
        principals()
    )
}

/// Three replicas, `config` making each one's text from its top level.
async fn replicas(config: impl Fn(&str) -> String) -> Vec<TestGateway> {
    let state = redmark::mrtr::state::generate_secret();
    let cluster = redmark::mrtr::state::generate_secret();
    let mut out = Vec::new();
    for node in ["n1", "n2", "n3"] {
        out.push(TestGateway::start(&config(&cluster_top(node, &state, &cluster))).await);
    }
    out
}

/// Forwards sent and received across the replicas.
async fn forwards(gws: &[TestGateway]) -> (f64, f64) {
    let (mut sent, mut received) = (0.0, 0.0);
    for gw in gws {
        sent += gw.metric(FORWARDED).await.unwrap_or(0.0);
        received += gw.metric(RECEIVED).await.unwrap_or(0.0);
    }
    (sent, received)
}

/// A request as `key`'s principal declaring the tasks extension (and, for
/// `tasks/*`, `Mcp-Name` set to the task id).
async fn task_rpc(gw: &TestGateway, key: &str, method: &str, mut params: Value) -> Resp {
    let name = params["taskId"].as_str().map(str::to_owned);
    params["_meta"] = meta(declaring_tasks());
    let mut rb = gw.request(method, params).bearer_auth(key);
    if let Some(name) = name {
        rb = rb.header("mcp-name", name);
    }
    let r = read_resp(gw.send(rb).await).await;
    assert_eq!(r.status, 200, "{method}: {}", r.raw);
    r
}

/// Polls `tasks/get` on `gw` until `ready` says the task is as wanted.
async fn until(
    gw: &TestGateway,
    key: &str,
    id: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || async {
        let t = task_rpc(gw, key, "tasks/get", json!({"taskId": id}))
            .await
            .result()
            .clone();
        if ready(&t) { Ok(t) } else { Err(t.to_string()) }
    })
    .await
}

/// Who answers the relayed tasks: API keys and OAuth tokens, each with
/// and without the `capped` scope.
struct Caller {
    bearer: String,
    subject: &'static str,
    capped: bool,
}

/// carol and dan by API key; erin and fay by tokens of `idp`, whose
/// audience every replica accepts.
async fn callers(idp: &Idp) -> Vec<Caller> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let token = |sub: &str, scope: &str| {
        idp.mint(
            json!({"iss": idp.issuer, "sub": sub, "aud": AUDIENCE, "scope": scope,
            "groups": ["ops"], "iat": now, "exp": now + 3600}),
        )
    };
    vec![
        Caller {
            bearer: CAPPED.into(),
            subject: "carol",
            capped: true,
        },
        Caller {
            bearer: FREE.into(),
            subject: "dan",
            capped: false,
        },
        Caller {
            bearer: token("erin", "mcp capped").await,
            subject: "erin",
            capped: true,
        },
        Caller {
            bearer: token("fay", "mcp").await,
            subject: "fay",
            capped: false,
        },
    ]
}

/// The audience of every replica's tokens.
const AUDIENCE: &str = "https://mcp.example.com/mcp";

/// The relayed task's rules: a capped caller does not confirm a delete;
/// the name given is the caller's own subject, and the caller's name is
/// its issuer and subject (`issuer#subject`) or, without an issuer, its
/// subject: what a forward that lost the issuer or subject would break.
const TASK_POLICY: &str = r##"
[tool.confirm_delete.fields.confirm]
authz = '!("capped" in principal.scopes) || value != true'
authz_message = "a capped caller does not confirm deletes"

[tool.confirm_delete.fields.name]
authz = 'value == principal.subject && principal.name == (principal.issuer == "" ? principal.subject : principal.issuer + "#" + principal.subject)'
authz_message = "the caller's own subject, as its credential names it"
"##;

/// A native server's relayed task, created on each replica and answered
/// from each (nine pairs per caller, six of them forwarded to the relaying
/// replica): a capped caller's confirmation is refused everywhere (the
/// task fails `policy_denied`, the server never hears the answer), an
/// uncapped caller's reaches the server everywhere, for API keys and OAuth
/// tokens alike.
#[tokio::test]
async fn a_scope_rule_on_a_relayed_tasks_answer_holds_on_every_replica() {
    let idp = Idp::start().await;
    let mut native = Command::new(example_bin("conformance_fixture"));
    native.args(["--native", "--http", "127.0.0.1:0"]);
    let (_native, port) = spawn_listening(native, "conformance-fixture listening on").await;
    let fx = Fixture::new();
    let policy = fx.policy(TASK_POLICY);
    let issuer = &idp.issuer;
    let gws = replicas(|top| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{top}\n\
             [auth.oauth]\nissuer = \"{issuer}\"\naudience = \"{AUDIENCE}\"\nscopes = [\"mcp\"]\n\n\
             [[route]]\nname = \"main\"\npath = \"/mcp\"\n{policy}\n\
             [route.upstream]\nprotocol = \"2026-07-28\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
             [route.tasks]\n"
        )
    })
    .await;
    for caller in callers(&idp).await {
        let key = caller.bearer.as_str();
        let yes = json!({"confirm": {"action": "accept",
            "content": {"confirm": true, "name": caller.subject}}});
        for (c, creator) in gws.iter().enumerate() {
            for (a, answerer) in gws.iter().enumerate() {
                let at = format!(
                    "{}: created on n{}, answered on n{}",
                    caller.subject,
                    c + 1,
                    a + 1
                );
                let call =
                    json!({"name": "confirm_delete", "arguments": {"filename": "notes.txt"}});
                let made = task_rpc(creator, key, "tools/call", call).await;
                assert_eq!(made.result()["resultType"], "task", "{at}: {}", made.raw);
                let id = made.result()["taskId"].as_str().unwrap().to_owned();
                until(creator, key, &id, "the confirmation", |t| {
                    t["inputRequests"].get("confirm").is_some()
                })
                .await;
                let params = json!({"taskId": id, "inputResponses": yes});
                let ack = task_rpc(answerer, key, "tasks/update", params).await;
                assert_eq!(ack.result(), &json!({"resultType": "complete"}), "{at}");
                let done = until(answerer, key, &id, "the task to end", |t| {
                    matches!(t["status"].as_str(), Some("completed" | "failed"))
                })
                .await;
                if caller.capped {
                    assert_eq!(done["status"], "failed", "{at}: {done}");
                    assert_eq!(
                        done["error"]["data"]["reason"], "policy_denied",
                        "{at}: {done}"
                    );
                    assert_eq!(
                        done["statusMessage"], "a capped caller does not confirm deletes",
                        "{at}: {done}"
                    );
                } else {
                    assert_eq!(done["status"], "completed", "{at}: {done}");
                    assert_eq!(done["result"]["content"][0]["text"], "deleted", "{at}");
                }
            }
        }
    }
    // Every update away from its relayer went there (and its polls too).
    let (sent, received) = forwards(&gws).await;
    assert!(sent >= 24.0, "{sent} forwarded");
    assert_eq!(sent, received, "every forward arrived");
    for gw in gws {
        gw.stop().await;
    }
}

/// A hold-mode call on each replica, its answer retried through each: a
/// capped caller's 5000 is refused everywhere (`policy_denied`, the server
/// hears a cancel), an uncapped caller's reaches the server.
#[tokio::test]
async fn a_scope_rule_on_a_hold_mode_retry_holds_on_every_replica() {
    let fx = policy_support_fixture();
    let gws = replicas(|top| fx.config(top)).await;
    let form = schema(json!({"amount": {"type": "number"}}), &["amount"]);
    for (key, capped) in [(CAPPED, true), (FREE, false)] {
        for (c, owner) in gws.iter().enumerate() {
            for (a, answerer) in gws.iter().enumerate() {
                let tag = format!("{}-{c}-{a}", if capped { "capped" } else { "free" });
                let call = ask(&form, "How much?", &tag).key(key);
                let q = asked(&call.start(owner).await);
                let r = call
                    .answer(answerer, &q, accepted(json!({"amount": 5000})))
                    .await;
                if capped {
                    let data = assert_error(&r, 200, -32602, "policy_denied").data();
                    assert_eq!(data["field"], "amount", "{tag}");
                    assert_eq!(fx.log.only_answer(&tag).await["action"], "cancel", "{tag}");
                } else {
                    assert_eq!(output(&r)["content"]["amount"], 5000, "{tag}");
                }
            }
        }
    }
    let (sent, received) = forwards(&gws).await;
    assert_eq!(sent, 12.0, "every retry away from its owner was forwarded");
    assert_eq!(sent, received, "every forward arrived");
    for gw in gws {
        gw.stop().await;
    }
}

/// The policy fixture with the rule of the issue.
fn policy_support_fixture() -> Fixture {
    Fixture::with_policy(
        "[tool.ask.fields.amount]\n\
         authz = '!(\"capped\" in principal.scopes) || value <= 100'\n\
         authz_message = \"a capped caller asks for at most 100\"\n",
    )
}
