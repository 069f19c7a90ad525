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
    // The cause is in the message itself (and so not also its `source()`).
    assert!(err.to_string().contains("No such file"), "{err:?}");
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

/// The text of an error as `redmark serve` prints it (`{:#}`: the error,
/// then each `source()` after ": ").
fn with_chain(e: &(dyn std::error::Error + 'static)) -> String {
    crate::front::forward::error_chain(e)
}

/// A segment (between ": " and line breaks) that `text` says twice.
fn said_twice(text: &str) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    text.split(['\n'])
        .flat_map(|line| line.split(": "))
        .map(str::trim)
        .filter(|s| s.len() > 3)
        .find(|s| !seen.insert(*s))
        .map(str::to_owned)
}

fn said_once(what: &str, text: &str) {
    assert_eq!(said_twice(text), None, "{what} repeats itself: {text}");
}

/// Every start error, printed with its chain as `redmark serve` prints it,
/// says its cause once (issue 37: "environment variable REDMARK_CLUSTER_KEY
/// is not base64url ...: environment variable REDMARK_CLUSTER_KEY ...").
#[test]
fn no_start_error_says_its_cause_twice() {
    let io = || std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
    let config_errors = || {
        crate::config::ConfigErrors(vec![crate::config::ConfigError {
            file: "p.toml".into(),
            line: 1,
            column: 2,
            message: "unknown key `x`".into(),
        }])
    };
    let all: Vec<StartError> = vec![
        StartError::Policy {
            route: "r".into(),
            errors: config_errors(),
        },
        KeyError::EnvNotSet {
            id: "k1".into(),
            var: "REDMARK_STATE_KEY_K1".into(),
        }
        .into(),
        KeyError::BadSecret { id: "k1".into() }.into(),
        KeyError::NoSecret { id: "k1".into() }.into(),
        KeyError::NoSigningKey.into(),
        StartError::Audit {
            path: "/var/log/audit.jsonl".into(),
            cause: io(),
        },
        ClusterError::EnvNotSet {
            var: "REDMARK_CLUSTER_KEY".into(),
        }
        .into(),
        ClusterError::BadSecret {
            var: "REDMARK_CLUSTER_KEY".into(),
        }
        .into(),
        ClusterError::Store {
            url: "redis://h".into(),
            why: "connection refused".into(),
        }
        .into(),
        StartError::Tls {
            listener: "client",
            cause: crate::front::tls::TlsError::Certificate {
                path: "cert.pem".into(),
                reason: "no certificate in the file".into(),
            },
        },
        StartError::AccessLog {
            path: "/var/log/access.log".into(),
            cause: io(),
        },
        crate::front::oauth::OAuthError::NoOrigin("r".into()).into(),
        StartError::UpstreamClient("the TLS settings cannot be built".into()),
        StartError::UpstreamTokenEnv {
            route: "r".into(),
            var: "TOKEN".into(),
        },
        crate::event_loops::StartError {
            index: 1,
            cause: io(),
        }
        .into(),
        StartError::Bind {
            addr: "127.0.0.1:80".parse().unwrap(),
            cause: io(),
        },
    ];
    for e in &all {
        let text = with_chain(e);
        said_once("a start error", &text);
        // The cause is still there, once.
        assert!(!text.ends_with(": "), "{text}");
    }
    let reload = [
        reload::ReloadError::from(config_errors()),
        reload::ReloadError::from(StartError::from(ClusterError::BadSecret {
            var: "REDMARK_CLUSTER_KEY".into(),
        })),
    ];
    for e in &reload {
        said_once("a reload error", &with_chain(e));
    }
    said_once(
        "a report error",
        &with_chain(&crate::telemetry::report::ReportError::Read {
            path: "audit.jsonl".into(),
            cause: io(),
        }),
    );
    said_once(
        "an audit error",
        &with_chain(&crate::telemetry::audit::AuditError::from(io())),
    );
}

/// Every error a client can get from an operation's ending, and every
/// upstream failure, says its cause once (issue 37: "the upstream server
/// went away: the upstream server went away: ...").
#[test]
fn no_reason_message_says_its_cause_twice() {
    use crate::mrtr::ending::Ending;
    use crate::protocol::{IntoReject, Reason};
    use crate::upstream::UpstreamError;
    use serde_json::json;
    use std::time::Duration;

    let upstream = [
        UpstreamError::Lost("the server ended the HTTP session (404)".into()),
        UpstreamError::Unavailable("the server did not answer initialize within 10s".into()),
        UpstreamError::Incompatible("1999-01-01".into()),
        UpstreamError::Busy(Duration::from_secs(5)),
        UpstreamError::Timeout(Duration::from_secs(5)),
        UpstreamError::ShuttingDown,
    ];
    let mut endings: Vec<Ending> = upstream
        .iter()
        .cloned()
        // How an operation makes its ending from what its call reported.
        .map(Ending::lost)
        .collect();
    endings.extend([
        Ending::UpstreamTimeout(Duration::from_secs(60)),
        Ending::Expired(Duration::from_secs(600)),
        Ending::RoundsExhausted(8),
        Ending::MissingCapability(json!({"elicitation": {}})),
        Ending::TooManyPending(100),
        Ending::ShuttingDown,
        Ending::PolicyRefused {
            reason: Reason::PolicyTooManyQuestions,
            field: None,
            message: "the server asked more than 10 questions".into(),
        },
        Ending::ModelOwned {
            field: "room_id".into(),
            guidance: "room_id is in the arguments: pass it".into(),
        },
        Ending::PolicyInvalid {
            field: "guests".into(),
            rule: "maximum".into(),
            message: "guests: must be at most 10".into(),
        },
        Ending::PolicyDenied {
            field: "room".into(),
            message: "room: not allowed for this principal".into(),
        },
        Ending::PolicyError {
            field: "room".into(),
            message: "room: the rule failed: no such key".into(),
        },
        Ending::StateTooLarge {
            len: 9000,
            max: 8192,
        },
    ]);
    for ending in &endings {
        if let Some(reject) = ending.reject() {
            said_once(ending.outcome(), &reject.message);
        }
    }
    for e in upstream {
        let reason = e.reason();
        said_once(reason.as_str(), &e.into_reject().message);
    }
}

#[test]
fn check_warns_that_max_per_principal_does_not_apply_without_auth() {
    let dir = tempfile::tempdir().unwrap();
    let text = |extra: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[[route]]\nname = \"r\"\npath = \"/mcp\"\n[route.upstream]\ncommand = [\"true\"]\n{extra}"
        )
    };
    let findings = |extra: &str| {
        let t = text(extra);
        let config = Config::parse(&t, "t.toml", dir.path().to_path_buf()).unwrap();
        checks::offline(&config, &t, "t.toml").0
    };
    let warned = |f: &checks::Findings| {
        f.warnings.iter().any(|w| {
            w.message
                .contains("max_per_principal does not apply without [auth]")
        })
    };
    assert!(warned(&findings("[sessions]\nmax_per_principal = 8\n")));
    assert!(!warned(&findings("")), "the default says nothing");
    let key = "[[auth.api_key]]\nprincipal = \"alice\"\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";
    assert!(!warned(&findings(&format!(
        "[sessions]\nmax_per_principal = 8\n{key}"
    ))));
}
