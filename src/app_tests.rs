use super::build::upstream_http_client;
use super::*;
use crate::config::Config;
use crate::telemetry::metrics::Metrics;
use std::sync::Arc;
use tokio::net::TcpListener;

fn write(dir: &std::path::Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn config_with_policy(dir: &std::path::Path) -> PathBuf {
    write(dir, "policy.toml", "[defaults]\nmax_questions = 3\n");
    write(
        dir,
        "redmark.toml",
        "[server]\nlisten = \"127.0.0.1:0\"\n[[route]]\nname = \"r\"\npath = \"/mcp\"\npolicy = \"policy.toml\"\n[route.upstream]\ncommand = [\"true\"]\n",
    )
}

#[tokio::test]
async fn a_policy_that_becomes_unreadable_after_the_check_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::load(&config_with_policy(dir.path())).expect("config checks");
    check(&config).expect("policy checks");
    // Between `check` and `start` the policy goes away (a bad deploy, a
    // volume that did not mount): the gateway must not serve the route unguarded.
    std::fs::remove_file(dir.path().join("policy.toml")).unwrap();
    let err = build(&config, Arc::new(Metrics::new()), Options::default())
        .err()
        .expect("the start is refused");
    let text = err.to_string();
    assert!(matches!(err, StartError::Policy { .. }), "{text}");
    assert!(
        text.contains("route `r`") && text.contains("policy.toml"),
        "{text}"
    );
    assert!(text.contains("cannot read"), "{text}");
}

#[tokio::test]
async fn a_policy_broken_after_the_check_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::load(&config_with_policy(dir.path())).expect("config checks");
    write(
        dir.path(),
        "policy.toml",
        "[defaults]\nmax_questions = 3\nbogus = 1\n",
    );
    let err = build(&config, Arc::new(Metrics::new()), Options::default())
        .err()
        .expect("the start is refused");
    assert!(err.to_string().contains("policy.toml:3"), "{err}");
    let checked = check(&config).expect_err("check sees it too");
    assert_eq!(checked.0[0].line, 3);
}

#[test]
fn state_keys_fail_with_their_own_errors() {
    let dir = tempfile::tempdir().unwrap();
    let text = |keys: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[[route]]\nname = \"r\"\npath = \"/mcp\"\n[route.upstream]\ncommand = [\"true\"]\n{keys}"
        )
    };
    let parse =
        |keys: &str| Config::parse(&text(keys), "t.toml", dir.path().to_path_buf()).unwrap();
    let unset = parse(
        "[[state.keys]]\nid = \"k1\"\nsecret_env = \"REDMARK_TEST_SURELY_UNSET\"\nsign = true\n",
    );
    assert_eq!(
        keyring(&unset).unwrap_err(),
        KeyError::EnvNotSet {
            id: "k1".into(),
            var: "REDMARK_TEST_SURELY_UNSET".into()
        }
    );
    assert!(keyring(&parse("")).unwrap().is_none());
    let secret = crate::config::generate_secret();
    let good = parse(&format!(
        "[[state.keys]]\nid = \"k1\"\nsecret = \"{secret}\"\nsign = true\n"
    ));
    assert!(keyring(&good).unwrap().is_some());
}

#[test]
fn an_audit_log_that_cannot_open_is_a_start_error_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[audit]\npath = \"{}\"\n[[route]]\nname = \"r\"\npath = \"/mcp\"\n[route.upstream]\ncommand = [\"true\"]\n",
        dir.path().join("missing-dir/audit.jsonl").display()
    );
    let config = Config::parse(&text, "t.toml", dir.path().to_path_buf()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(async { build(&config, Arc::new(Metrics::new()), Options::default()).err() })
        .expect("refused");
    assert!(matches!(err, StartError::Audit { .. }), "{err}");
    assert!(err.to_string().starts_with("audit log "), "{err}");
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert!(
        source.is_some_and(|s| s.contains("No such file")),
        "{err:?}"
    );
}

/// A burst of concurrent upstream requests leaves at most
/// [`UPSTREAM_IDLE_CONNECTIONS`] connections open once it is over (the
/// soak's leak: every connection of the burst stayed for minutes).
#[tokio::test]
async fn the_upstream_client_keeps_a_bounded_idle_pool_after_a_burst() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(AtomicUsize::new(0));
    let burst = UPSTREAM_IDLE_CONNECTIONS * 2;
    let gate = Arc::new(tokio::sync::Barrier::new(burst));
    let server = {
        let (open, gate) = (open.clone(), gate.clone());
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let (open, gate) = (open.clone(), gate.clone());
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let mut first = true;
                    // One response per request head; held until the whole burst is in.
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        if first {
                            gate.wait().await;
                            first = false;
                        }
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if s.write_all(ok).await.is_err() {
                            break;
                        }
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        })
    };
    let http = upstream_http_client();
    let calls = (0..burst).map(|_| {
        let http = http.clone();
        let uri = crate::upstream::client::parse_url(&format!("http://{addr}/")).unwrap();
        async move {
            http.send(
                http::Method::GET,
                &uri,
                http::HeaderMap::new(),
                bytes::Bytes::new(),
            )
            .await
            .unwrap()
        }
    });
    let replies = futures::future::join_all(calls).await;
    for r in replies {
        let body = crate::upstream::client::read_limited(r.into_body(), 16)
            .await
            .unwrap();
        assert_eq!(body, b"ok");
    }
    // Every request got its own connection; the pool gives back the surplus.
    // Bounded poll: closing is asynchronous on both sides.
    let mut left = open.load(Ordering::SeqCst);
    for _ in 0..100 {
        if left <= UPSTREAM_IDLE_CONNECTIONS {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        left = open.load(Ordering::SeqCst);
    }
    assert!(
        left <= UPSTREAM_IDLE_CONNECTIONS,
        "{left} of {burst} connections still open"
    );
    server.abort();
}
