//! The report page: `redmark report --format html` and `/report` on the
//! admin listener, rendered by a real browser (Debian's `chromium`,
//! installed by scripts/setup-test-deps.sh) with no console errors and
//! every part present; `/report`'s `since` parameter and its `Host` and
//! `Origin` checks.

// A test may panic (that is how it fails) and cast freely.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::json;

/// Runs headless Chromium on `url`: the DOM it built, and the console
/// messages it logged (`CONSOLE` lines of its stderr log).
fn chromium(url: &str, profile: &Path) -> (String, Vec<String>) {
    let out = Command::new("timeout")
        .args(["-k", "5", "90", "chromium"])
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium runs: install it with scripts/setup-test-deps.sh");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && dom.contains("<html"),
        "chromium failed ({:?}): {stderr}",
        out.status
    );
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_owned)
        .collect();
    (dom, console)
}

#[test]
fn the_console_check_sees_an_error() {
    // The check itself: a page that logs an error is caught.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><script>console.error('boom')</script></body></html>",
    )
    .unwrap();
    let (_, console) = chromium(
        &format!("file://{}", page.display()),
        &dir.path().join("profile"),
    );
    assert!(console.iter().any(|l| l.contains("boom")), "{console:?}");
}

#[tokio::test]
async fn the_live_page_renders_without_console_errors() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let gw = TestGateway::start(&rooms_config(&format!(
        "[audit]\npath = {}\n",
        toml_path(&audit)
    )))
    .await;
    for priority in [2, 4, 5] {
        let op =
            Op::tool("create_ticket", json!({"title": "printer"})).caps(json!({"elicitation": {}}));
        let resps = op
            .walk(&gw, 1, |_, q| {
                q.reply_only(json!({"action": "accept", "content": {"priority": priority}}))
            })
            .await;
        assert_eq!(
            resps[1].result()["resultType"],
            "complete",
            "{}",
            resps[1].raw
        );
    }
    let http = reqwest::Client::new();
    let url = format!("{}/report?since=24h", gw.admin);
    // The audit writer appends on its own thread: the page shows the three
    // questions once their lines are written.
    let (http2, url2) = (http.clone(), url.clone());
    eventually("the page to count three questions", move || {
        let (http, url) = (http2.clone(), url2.clone());
        async move {
            let resp = http.get(&url).send().await.map_err(|e| e.to_string())?;
            let headers = resp.headers().clone();
            let html = resp.text().await.map_err(|e| e.to_string())?;
            if !html.contains("3 questions in 3 operations") {
                return Err(html);
            }
            assert_eq!(headers["content-type"], "text/html; charset=utf-8");
            assert!(
                headers["content-security-policy"]
                    .to_str()
                    .unwrap()
                    .starts_with("default-src 'none'")
            );
            Ok(())
        }
    })
    .await;

    // The same checks as every admin route, and the CLI's `--since` choices.
    let r = http
        .get(&url)
        .header("Origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .get(&url)
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .get(format!("{}/report?since=yesterday-ish", gw.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("--since"));
    let future = http
        .get(format!("{}/report?since=2999-01-01T00:00:00Z", gw.admin))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(future.contains("No questions in this window."), "{future}");

    // A real browser renders the live page: no console error, every part there.
    // On a blocking thread: the gateway serves the page on this runtime.
    let profile = dir.path().join("profile");
    let (dom, console) = tokio::task::spawn_blocking(move || chromium(&url, &profile))
        .await
        .unwrap();
    assert!(console.is_empty(), "console: {console:#?}");
    for part in [
        "<main>",
        "<h1>What the questions cost people</h1>",
        "id=\"suggestions\"",
        "id=\"attention\"",
        "id=\"answer-times\"",
        "id=\"trend\"",
        "<caption>",
        "role=\"img\"",
        "class=\"bar tool\"",
        "main / create_ticket",
    ] {
        assert!(dom.contains(part), "{part} missing from {dom}");
    }
    // Text beside every bar: each bar's `<li>` has its number written out.
    let bars = dom.matches("<li class=\"bar").count();
    // One per tool, seven answer-time bars, one per day.
    assert_eq!(bars, 1 + 7 + 1, "{dom}");
    assert_eq!(dom.matches("</svg><span>").count(), bars, "{dom}");
    gw.stop().await;

    // The CLI writes the same page.
    let out = Command::new(env!("CARGO_BIN_EXE_redmark"))
        .args(["report", "--format", "html", "--audit"])
        .arg(&audit)
        .output()
        .unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.contains("create_ticket"));
}

/// Names a hostile server chose, on the live `/report`: nothing in them
/// acts (no raw control or bidi character reaches the page, no markup), and
/// the policy lines a browser shows, copied as text, parse with redmark's
/// policy parser to exactly the tool and field they name.
#[tokio::test]
async fn the_live_page_shows_hostile_names_as_text() {
    use redmark::policy::{Defaults, Policy};
    const FIELD: &str = "room\"]\n[defaults]\nmode = \"replay\"\n#";
    const TOOL: &str = "<img src=x onerror=alert(1)>\u{202e}\u{1b}[2J\u{9b}";
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let time = redmark::telemetry::audit::timestamp(std::time::SystemTime::now());
    let mut log = String::new();
    for (tool, field) in [("files.read", FIELD), (TOOL, "a\"\u{2066}b")] {
        for _ in 0..20 {
            let line = json!({
                "time": time, "route": "main", "tool": tool, "outcome": "accepted",
                "answer_ms": 9_000, "redundant": true,
                "fields": [field], "redundant_fields": [field],
            });
            log.push_str(&format!("{line}\n"));
        }
    }
    std::fs::write(&audit, log).unwrap();
    let gw = TestGateway::start(&rooms_config(&format!(
        "[audit]\npath = {}\n",
        toml_path(&audit)
    )))
    .await;
    let url = format!("{}/report", gw.admin);
    let html = reqwest::get(&url).await.unwrap().text().await.unwrap();
    let acting: Vec<char> = html
        .chars()
        .filter(|c| (c.is_control() && *c != '\n') || ('\u{202a}'..='\u{202e}').contains(c))
        .collect();
    assert!(acting.is_empty(), "{acting:?} in the page");
    assert!(!html.contains("<img"), "{html}");

    let profile = dir.path().join("profile");
    let (dom, console) = tokio::task::spawn_blocking(move || chromium(&url, &profile))
        .await
        .unwrap();
    gw.stop().await;
    assert!(console.is_empty(), "console: {console:#?}");
    assert!(!dom.contains("<img"), "{dom}");
    // Each suggestion's lines, as the browser shows them, pasted into a policy.
    let copied: Vec<String> = dom
        .split("<pre><code>")
        .skip(1)
        .filter_map(|s| s.split_once("</code>"))
        .map(|(code, _)| {
            code.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .collect();
    assert_eq!(copied.len(), 2, "{dom}");
    for (tool, field) in [("files.read", FIELD), (TOOL, "a\"\u{2066}b")] {
        let text = copied
            .iter()
            .find(|c| Policy::parse(c, "copied.toml").is_ok_and(|p| p.tools.contains_key(tool)))
            .unwrap_or_else(|| panic!("no lines for {tool:?} in {copied:#?}"));
        let policy = Policy::parse(text, "copied.toml").unwrap();
        assert_eq!(policy.tools.len(), 1, "{text}");
        assert_eq!(
            policy.tools[tool].model_owned,
            [field.to_owned()].into(),
            "{text}"
        );
        assert_eq!(policy.defaults.mode, Defaults::default().mode, "{text}");
    }
}
