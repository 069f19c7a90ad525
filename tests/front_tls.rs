//! HTTPS on the front (docs/src/guides/oauth-tls.md, "TLS"): `[server.tls]` with certificates the
//! test makes (rcgen), real TLS clients (reqwest on rustls) in front of the
//! rooms example: HTTP/2 and HTTP/1.1 by ALPN, mutual TLS with `client_ca`,
//! certificates rotated on disk without a restart, and every file problem
//! refused at start.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use serde_json::json;

/// `[server.tls]` lines for these files.
fn tls_section(cert: &Path, key: &Path, client_ca: Option<&Path>) -> String {
    let mut s = format!(
        "[server.tls]\ncert = {}\nkey = {}\n",
        toml_path(cert),
        toml_path(key)
    );
    if let Some(ca) = client_ca {
        s.push_str(&format!("client_ca = {}\n", toml_path(ca)));
    }
    s
}

async fn list(http: &reqwest::Client, url: &str) -> Result<reqwest::Response, reqwest::Error> {
    let params = json!({"_meta": meta(json!({}))});
    mcp_post(http, url, json!(1), "tools/list", &params)
        .send()
        .await
}

/// The DER of the certificate the server presented on this response's connection.
fn peer_cert(resp: &reqwest::Response) -> Vec<u8> {
    resp.extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .expect("TLS info")
        .to_vec()
}

#[tokio::test]
async fn https_serves_http2_and_http1_by_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("redmark test CA");
    let server = ca.server("gateway");
    let (cert, key) = server.write(dir.path(), "server");
    let config = rooms_config(&tls_section(&cert, &key, None));
    let gw = TestGateway::start_https(&config, ca.https_client(None)).await;

    let resp = list(&gw.http, &gw.url).await.unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_2, "ALPN offers h2");
    assert_eq!(peer_cert(&resp), server.der);
    let body = read_resp(resp).await;
    assert!(body.result()["tools"].is_array(), "{}", body.raw);

    let http1 = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap()])
        .http1_only()
        .build()
        .unwrap();
    let resp = list(&http1, &gw.url).await.unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_11);
    assert_eq!(resp.status(), 200);

    // Plain HTTP to the HTTPS port, and a client that does not trust the CA, get nothing.
    let plain = format!("http://{}/mcp", gw.addr());
    assert!(list(&reqwest::Client::new(), &plain).await.is_err());
    let stranger = TestCa::new("another CA").https_client(None);
    let err = list(&stranger, &gw.url).await.unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    gw.stop().await;
}

/// A server certificate of one CA and client certificates of another, the
/// `[server.tls]` section requiring them (mutual TLS).
struct Mutual {
    dir: tempfile::TempDir,
    ca: TestCa,
    clients: TestCa,
    section: String,
}

impl Mutual {
    fn new() -> Mutual {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("redmark test CA");
        let (cert, key) = ca.server("gateway").write(dir.path(), "server");
        let clients = TestCa::new("client CA");
        let ca_file = dir.path().join("clients.pem");
        std::fs::write(&ca_file, &clients.pem).unwrap();
        let section = tls_section(&cert, &key, Some(&ca_file));
        Mutual {
            dir,
            ca,
            clients,
            section,
        }
    }
}

#[tokio::test]
async fn client_ca_requires_a_client_certificate_from_that_ca() {
    let m = Mutual::new();
    let ca = &m.ca;
    let config = rooms_config(&m.section);
    let alice = m.clients.client("alice");
    let gw = TestGateway::start_https(&config, ca.https_client(Some(&alice))).await;

    let ok = list(&gw.http, &gw.url).await.unwrap();
    assert_eq!(ok.status(), 200);
    assert!(read_resp(ok).await.result()["tools"].is_array());

    for (who, client) in [
        ("no certificate", ca.https_client(None)),
        (
            "a certificate of another CA",
            ca.https_client(Some(&ca.client("mallory"))),
        ),
    ] {
        let refused = list(&client, &gw.url).await;
        assert!(refused.is_err(), "{who}: {refused:?}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_certificate_renewed_on_disk_is_served_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("redmark test CA");
    let first = ca.server("gateway-1");
    let (cert, key) = first.write(dir.path(), "server");
    let config = rooms_config(&tls_section(&cert, &key, None));
    let kept = ca.https_client(None);
    let gw = TestGateway::start_https(&config, kept.clone()).await;
    let before = list(&kept, &gw.url).await.unwrap();
    assert_eq!(peer_cert(&before), first.der);

    let second = ca.server("gateway-2");
    second.write(dir.path(), "server");
    eventually(
        "new connections to present the renewed certificate",
        || async {
            // A fresh client: a new connection, so a new handshake.
            let resp = list(&ca.https_client(None), &gw.url)
                .await
                .map_err(|e| e.to_string())?;
            if peer_cert(&resp) == second.der {
                Ok(())
            } else {
                Err("still the first certificate".to_owned())
            }
        },
    )
    .await;
    // The connection opened before the renewal was not dropped.
    let after = list(&kept, &gw.url).await.unwrap();
    assert_eq!(after.status(), 200);
    assert_eq!(
        peer_cert(&after),
        first.der,
        "same connection, same handshake"
    );
    gw.stop().await;
}

#[tokio::test]
async fn tls_files_that_do_not_load_refuse_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("redmark test CA");
    let (cert, _) = ca.server("one").write(dir.path(), "one");
    let (_, other_key) = ca.server("two").write(dir.path(), "two");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();

    for (what, cert, key, want) in [
        (
            "a key of another certificate",
            &cert,
            &other_key,
            "one.crt and key",
        ),
        (
            "no PEM certificate",
            &garbage,
            &other_key,
            "no PEM `CERTIFICATE` block",
        ),
        ("no PEM key", &cert, &garbage, "private key"),
    ] {
        let config = rooms_config(&tls_section(cert, key, None));
        let config = redmark::config::Config::parse(&config, "test.toml", repo()).unwrap();
        let err = redmark::start(config).await.err().expect(what);
        let text = err.to_string();
        assert!(
            text.contains("client listener TLS") && text.contains(want),
            "{what}: {text}"
        );
    }

    // A file that is missing is a config error at the section's line.
    let missing = dir.path().join("missing.crt");
    let text = rooms_config(&tls_section(&missing, &other_key, None));
    let errors = redmark::config::Config::parse(&text, "test.toml", repo()).unwrap_err();
    let line = text.lines().position(|l| l == "[server.tls]").unwrap() + 1;
    assert_eq!(errors.0[0].line, line, "{errors}");
    assert!(errors.to_string().contains("missing.crt"), "{errors}");
}

/// `tools/call list_rooms` on `http`, with `key` as its API key if given.
async fn list_rooms(http: &reqwest::Client, url: &str, key: Option<&str>) -> Resp {
    let params = json!({"name": "list_rooms", "arguments": {}, "_meta": meta(json!({}))});
    let mut rb = mcp_post(http, url, json!(2), "tools/call", &params);
    if let Some(key) = key {
        rb = rb.bearer_auth(key);
    }
    read_resp(rb.send().await.unwrap()).await
}

#[tokio::test]
async fn a_client_certificate_names_the_principal_with_client_principal() {
    let m = Mutual::new();
    let (dir, ca, clients) = (&m.dir, &m.ca, &m.clients);
    // Calls need credentials ([auth]); the rule sees who the certificate names.
    let policy = dir.path().join("certs.toml");
    std::fs::write(
        &policy,
        "[tool.list_rooms]\nallow = 'principal.subject == \"alice\" && principal.issuer == \"CN=client CA\" && \"payments\" in principal.groups && principal.claims.common_name == \"alice\"'\ndeny_message = \"only alice of payments\"\n",
    )
    .unwrap();
    const KEY: &str = "key-bob-0123456789abcdef";
    let extra =
        m.section.clone() + "client_principal = \"common_name\"\n" + &api_key(KEY, "bob", &[]);
    let config = rooms_config(&extra).replace(
        "path = \"/mcp\"\n",
        &format!("path = \"/mcp\"\npolicy = {}\n", toml_path(&policy)),
    );
    let alice = ca.https_client(Some(&clients.client_in("alice", &["payments"])));
    let gw = TestGateway::start_https(&config, alice.clone()).await;

    // No Authorization: the certificate is the credential.
    let r = list_rooms(&alice, &gw.url, None).await;
    assert!(r.result()["content"].is_array(), "{}", r.raw);

    // Same CA, another subject: authenticated, and the rule sees it is not alice.
    let carol = ca.https_client(Some(&clients.client_in("carol", &["payments"])));
    let r = list_rooms(&carol, &gw.url, None).await;
    assert_error(&r, 200, -32602, "policy_denied");
    assert_eq!(r.error()["message"], "only alice of payments");

    // Credentials sent on the connection win over the certificate: a bad key
    // is refused, a good one is its own principal (bob, not alice).
    let r = list_rooms(&alice, &gw.url, Some("not-a-key")).await;
    assert_error(&r, 401, -32600, "invalid_credentials");
    let r = list_rooms(&alice, &gw.url, Some(KEY)).await;
    assert_error(&r, 200, -32602, "policy_denied");

    // A verified certificate with no CN names nobody: the request needs a key.
    let nameless = ca.https_client(Some(&clients.client_in("", &[])));
    let r = list_rooms(&nameless, &gw.url, None).await;
    assert_eq!(r.status, 401, "{}", r.raw);
    gw.stop().await;
}

#[test]
fn client_principal_without_client_ca_or_on_the_admin_listener_is_refused() {
    for (section, want) in [
        (
            "[server.tls]\ncert = \"a.crt\"\nkey = \"a.key\"\nclient_principal = \"common_name\"\n",
            "client_principal needs client_ca",
        ),
        (
            "[server.admin_tls]\ncert = \"a.crt\"\nkey = \"a.key\"\nclient_ca = \"ca.pem\"\nclient_principal = \"subject\"\n",
            "the admin listener has no principals",
        ),
        (
            "[server.tls]\ncert = \"a.crt\"\nkey = \"a.key\"\nclient_ca = \"ca.pem\"\nclient_principal = \"email\"\n",
            "unknown variant `email`",
        ),
    ] {
        let config = rooms_config(section);
        let err = redmark::config::Config::parse(&config, "test.toml", repo())
            .expect_err(want)
            .to_string();
        assert!(err.contains(want), "{want}: {err}");
    }
}
