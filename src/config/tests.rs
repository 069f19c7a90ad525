use super::*;

const GOOD: &str = r#"
[server]
listen = "127.0.0.1:8080"
admin = "127.0.0.1:9464"

[[auth.api_key]]
sha256 = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
principal = "alice"
groups = ["facilities"]

[[route]]
name = "rooms"
path = "/mcp/rooms"
[route.upstream]
command = ["python3", "server.py"]
env = { LOG_LEVEL = "info" }
"#;

fn parse(text: &str) -> Result<Config, ConfigErrors> {
    Config::parse(text, "redmark.toml", PathBuf::from("/etc/redmark"))
}

#[test]
fn accepts_the_documented_shape() {
    let c = parse(GOOD).unwrap();
    assert_eq!(c.routes.len(), 1);
    assert_eq!(
        c.auth.unwrap().api_key[0].get_ref().groups,
        vec!["facilities"]
    );
    let UpstreamTarget::Stdio {
        program,
        args,
        cwd,
        env,
    } = c.routes[0].get_ref().target(&c.base_dir)
    else {
        panic!("stdio expected")
    };
    assert_eq!(program, PathBuf::from("python3"));
    assert_eq!(args, vec!["server.py"]);
    assert_eq!(cwd, PathBuf::from("/etc/redmark"));
    assert_eq!(env["LOG_LEVEL"], "info");
}

#[test]
fn unknown_key_is_an_error_with_its_line() {
    let text = GOOD.replace("path = \"/mcp/rooms\"", "path = \"/mcp/rooms\"\npaht = 1");
    let err = parse(&text).unwrap_err();
    assert_eq!(err.0.len(), 1);
    assert_eq!(err.0[0].line, 14, "{err}");
    assert!(err.0[0].message.contains("paht"), "{err}");
    assert!(err.to_string().starts_with("redmark.toml:14:"), "{err}");
}

#[test]
fn semantic_errors_name_the_line() {
    let text = GOOD.replace(
        "command = [\"python3\", \"server.py\"]",
        "command = [\"x\"]\nurl = \"http://h/mcp\"",
    );
    let err = parse(&text).unwrap_err();
    assert!(
        err.0[0].message.contains("both `command` and `url`"),
        "{err}"
    );
    assert_eq!(err.0[0].line, 14, "{err}");
    let err = parse(&GOOD.replace("2bb80d", "zz")).unwrap_err();
    assert!(err.0[0].message.contains("64 hex digits"), "{err}");
    assert_eq!(err.0[0].line, 6, "{err}");
    let err = parse(&GOOD.replace("127.0.0.1:8080", "localhost")).unwrap_err();
    assert_eq!(err.0[0].line, 3, "{err}");
}

#[test]
fn relative_program_resolves_against_config_dir() {
    let c = parse(&GOOD.replace("\"python3\"", "\"../bin/server\"")).unwrap();
    let UpstreamTarget::Stdio { program, .. } = c.routes[0].get_ref().target(&c.base_dir) else {
        panic!()
    };
    assert_eq!(program, PathBuf::from("/etc/redmark/../bin/server"));
}

#[test]
fn event_loops_default_to_one_per_core_and_zero_means_the_shared_runtime() {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    assert_eq!(parse(GOOD).unwrap().server.event_loops, cores);
    for n in [0, 3] {
        let set = GOOD.replace(
            "admin = \"127.0.0.1:9464\"",
            &format!("admin = \"127.0.0.1:9464\"\nevent_loops = {n}"),
        );
        assert_eq!(parse(&set).unwrap().server.event_loops, n);
    }
    let bad = GOOD.replace(
        "admin = \"127.0.0.1:9464\"",
        "admin = \"127.0.0.1:9464\"\nevent_loops = -1",
    );
    assert!(parse(&bad).is_err());
    let many = GOOD.replace(
        "admin = \"127.0.0.1:9464\"",
        "admin = \"127.0.0.1:9464\"\nevent_loops = 257",
    );
    let err = parse(&many).unwrap_err().to_string();
    assert!(err.contains("event_loops must be at most 256"), "{err}");
}

#[test]
fn connection_bounds_default_to_a_reverse_proxys_and_must_be_positive() {
    let c = parse(GOOD).unwrap();
    assert_eq!(c.server.header_read_timeout, Duration::from_secs(60));
    assert_eq!(c.server.body_read_timeout, Duration::from_secs(60));
    assert_eq!(c.server.send_timeout, Duration::from_secs(60));
    assert_eq!(c.server.max_connections, 4096);
    let set = GOOD.replace(
        "admin = \"127.0.0.1:9464\"",
        "admin = \"127.0.0.1:9464\"\nheader_read_timeout = \"2s\"\nbody_read_timeout = \"3s\"\nsend_timeout = \"4s\"",
    );
    let c = parse(&set).unwrap();
    assert_eq!(
        (
            c.server.header_read_timeout,
            c.server.body_read_timeout,
            c.server.send_timeout
        ),
        (
            Duration::from_secs(2),
            Duration::from_secs(3),
            Duration::from_secs(4)
        )
    );
    for zero in [
        "header_read_timeout = \"0s\"",
        "body_read_timeout = \"0s\"",
        "send_timeout = \"0s\"",
        "max_connections = 0",
    ] {
        let bad = GOOD.replace(
            "admin = \"127.0.0.1:9464\"",
            &format!("admin = \"127.0.0.1:9464\"\n{zero}"),
        );
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("must be positive"), "{zero}: {e}");
    }
}

const OAUTH: &str = r#"
[server]
listen = "127.0.0.1:8080"

[auth.oauth]
issuer = "https://idp.example.com/realms/platform"
audience = "https://mcp.example.com/mcp/rooms"
scopes = ["mcp"]
principal_claim = "sub"
groups_claim = "groups"

[[route]]
name = "rooms"
path = "/mcp/rooms"
[route.oauth]
audience = "https://mcp.example.com/mcp/rooms"
[route.upstream]
url = "http://127.0.0.1:9000/mcp"
"#;

#[test]
fn accepts_the_documented_oauth_shape() {
    let c = parse(OAUTH).unwrap();
    let o = c.auth.unwrap().oauth.unwrap().into_inner();
    assert_eq!(o.scopes.get_ref(), &["mcp"]);
    assert_eq!(o.algorithms.get_ref(), &["RS256", "ES256", "EdDSA"]);
    assert_eq!(o.leeway, Duration::from_secs(30));
}

#[test]
fn oauth_fails_closed_with_file_and_line() {
    let cases = [
        (
            r#"issuer = "https://idp.example.com/realms/platform""#,
            r#"issuer = "http://idp.example.com/realms/platform""#,
            "must be https",
        ),
        (r#"scopes = ["mcp"]"#, "scopes = []", "at least one scope"),
        (
            r#"scopes = ["mcp"]"#,
            r#"scopes = ["two words"]"#,
            "not a scope token",
        ),
        (
            r#"groups_claim = "groups""#,
            "groups_claim = \"groups\"\njwks_uri = \"ftp://x/jwks\"",
            "must be https",
        ),
        (
            r#"groups_claim = "groups""#,
            "groups_claim = \"groups\"\nalgorithms = [\"HS256\"]",
            "`HS256` is not allowed",
        ),
        (
            r#"groups_claim = "groups""#,
            "groups_claim = \"groups\"\nalgorithms = [\"none\"]",
            "`none` is not allowed",
        ),
    ];
    for (from, to, want) in cases {
        let text = OAUTH.replace(from, to);
        let errs = parse(&text).unwrap_err();
        let e = errs.0.iter().find(|e| e.message.contains(want));
        let e = e.unwrap_or_else(|| panic!("{want:?} not in {errs}"));
        assert!(e.line > 0, "{e}");
        assert_eq!(e.file, "redmark.toml");
    }
    // Loopback http is fine (development, tests).
    let loopback = OAUTH.replace("https://idp.example.com", "http://127.0.0.1:8443");
    assert!(parse(&loopback).is_ok());
}

#[test]
fn oauth_needs_an_audience_off_loopback() {
    let text = OAUTH
        .replace("127.0.0.1:8080", "0.0.0.0:8080")
        .replace("audience = \"https://mcp.example.com/mcp/rooms\"\n", "");
    let errs = parse(&text).unwrap_err();
    assert!(errs.to_string().contains("no audience"), "{errs}");
    let with_public = text.replace(
        "scopes = [\"mcp\"]",
        "scopes = [\"mcp\"]\npublic_url = \"https://mcp.example.com\"",
    );
    assert!(parse(&with_public).is_ok());
    let route_oauth_alone = GOOD.replace(
        "[route.upstream]",
        "[route.oauth]\naudience = \"https://x/mcp\"\n[route.upstream]",
    );
    assert!(
        parse(&route_oauth_alone)
            .unwrap_err()
            .to_string()
            .contains("needs [auth.oauth]")
    );
}

#[test]
fn http2_to_the_upstream_is_auto_unless_set() {
    let http = |line: &str| {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[[route]]\nname = \"a\"\npath = \"/mcp\"\n[route.upstream]\nurl = \"http://127.0.0.1:1/mcp\"\n{line}\n"
        );
        parse(&text).map(|c| c.routes[0].get_ref().upstream.get_ref().http2)
    };
    assert_eq!(http("").unwrap(), UpstreamHttp2::Auto);
    assert_eq!(
        http("http2 = \"prior_knowledge\"").unwrap(),
        UpstreamHttp2::PriorKnowledge
    );
    assert_eq!(http("http2 = \"off\"").unwrap(), UpstreamHttp2::Off);
    let err = http("http2 = \"yes\"").unwrap_err().to_string();
    assert!(err.contains("prior_knowledge"), "{err}");
}
