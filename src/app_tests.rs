use super::*;

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
