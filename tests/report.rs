//! `redmark report` on the booking figures of seed 003: 1,140 questions on
//! `book_meeting_room` at a median of 24 s, 9 % never answered, 703 redundant,
//! which the report must price at about 7.6 hours of people's attention, about
//! 4.7 of them on the redundant ones. The log is written by the real
//! [`AuditSink`] (rotating, hashing principals) and read by the real binary.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use redmark::telemetry::audit::{
    AuditConfig, AuditRecord, AuditSink, Method, Mode, Outcome, rotated, timestamp,
};
use serde_json::{Value, json};

const BOOKING: &str = "book_meeting_room";

fn record(
    time: SystemTime,
    tool: &str,
    outcome: Outcome,
    ms: Option<u64>,
    redundant: bool,
) -> AuditRecord {
    AuditRecord {
        time: timestamp(time),
        route: if tool == BOOKING { "rooms" } else { "billing" }.into(),
        tool: tool.into(),
        principal: "alice@example.com".into(),
        operation: "op".into(),
        key: "room".into(),
        method: Method::Elicitation,
        mode: Some(Mode::Form),
        fields: vec!["room_id".into()],
        outcome,
        answer_ms: ms,
        verdict: "ok".into(),
        redundant,
        redundant_fields: Vec::new(),
        repeated_fields: Vec::new(),
        default_offered: Vec::new(),
        default_kept: Vec::new(),
        narrowed: Vec::new(),
        trace_id: None,
        reask: false,
        rule: None,
        origin: None,
    }
}

/// The seed's questions: answered times spread symmetrically around 24 s (so
/// the median is exactly 24 s and the mean too), 103 unanswered, 703 redundant.
fn booking() -> Vec<(Outcome, Option<u64>, bool)> {
    let mut qs = vec![(Outcome::Unanswered, None, false); 103];
    qs.push((Outcome::Accepted, Some(24_000), true));
    for i in 0..351u64 {
        let d = 1_000 * (1 + i % 10);
        qs.push((Outcome::Accepted, Some(24_000 - d), true));
        qs.push((Outcome::Accepted, Some(24_000 + d), true));
    }
    for j in 0..167u64 {
        let outcome = match j {
            0..20 => Outcome::Declined,
            20..30 => Outcome::Cancelled,
            _ => Outcome::Accepted,
        };
        let d = 500 * (j % 7);
        qs.push((outcome, Some(24_000 - d), false));
        qs.push((outcome, Some(24_000 + d), false));
    }
    assert_eq!(qs.len(), 1_140);
    qs
}

/// Writes the log: the seed's questions over the last few days, 40 cheaper
/// questions on another tool, 50 old ones (for --since), and a broken line.
fn seed_log(dir: &Path) -> PathBuf {
    let path = dir.join("audit.jsonl");
    let mut cfg = AuditConfig::new(&path);
    cfg.max_bytes = Some(64 * 1024);
    cfg.keep = 20;
    cfg.hash_principals = true;
    let now = SystemTime::now();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sink = AuditSink::start(&cfg).unwrap();
    for n in 0..50u64 {
        let old = now - Duration::from_secs(90 * 86_400 + n);
        sink.record(record(old, BOOKING, Outcome::Accepted, Some(600_000), true));
    }
    for (n, (outcome, ms, redundant)) in booking().into_iter().enumerate() {
        let t = now - Duration::from_secs(3 * 86_400 - 60 * n as u64);
        sink.record(record(t, BOOKING, outcome, ms, redundant));
        if n % 28 == 0 {
            sink.record(record(
                t,
                "create_invoice",
                Outcome::Accepted,
                Some(30_000),
                false,
            ));
        }
    }
    runtime.block_on(sink.close()).unwrap();
    assert_eq!(sink.dropped(), 0);
    assert!(rotated(&path, 1).exists(), "the log should have rotated");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("not json\n");
    std::fs::write(&path, text).unwrap();
    path
}

fn report(path: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_redmark"))
        .arg("report")
        .arg("--audit")
        .arg(path)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    String::from_utf8(out.stdout).unwrap()
}

fn near(got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() <= tol, "got {got}, want {want} ± {tol}");
}

#[test]
fn json_reproduces_the_seed_arithmetic() {
    let dir = tempfile::tempdir().unwrap();
    let path = seed_log(dir.path());
    let v: Value = serde_json::from_str(&stdout(report(
        &path,
        &["--format", "json", "--since", "30d"],
    )))
    .unwrap();
    let t = &v["tools"][0];
    assert_eq!(t["tool"], BOOKING, "{v:#}");
    assert_eq!(
        (t["asked"].as_u64(), t["answered"].as_u64()),
        (Some(1_140), Some(1_037))
    );
    assert_eq!(
        (t["imputed"].as_u64(), t["redundant"].as_u64()),
        (Some(103), Some(703))
    );
    assert_eq!(t["median_s"].as_f64(), Some(24.0));
    let p90 = t["p90_s"].as_f64().unwrap();
    assert!(p90 > 24.0 && p90 <= 34.0, "{p90}");
    near(t["attention_hours"].as_f64().unwrap(), 7.6, 0.05);
    near(t["redundant_hours"].as_f64().unwrap(), 4.7, 0.05);
    near(t["unanswered_pct"].as_f64().unwrap(), 9.0, 0.05);
    near(t["redundant_pct"].as_f64().unwrap(), 61.7, 0.05);
    near(
        t["declined_pct"].as_f64().unwrap(),
        100.0 * 40.0 / 1140.0,
        1e-9,
    );
    assert_eq!(t["outcomes"]["cancelled"].as_u64(), Some(20));
    assert_eq!(v["tools"][1]["tool"], "create_invoice");
    assert_eq!(v["tools"][1]["asked"].as_u64(), Some(41));
    assert_eq!(v["total"]["asked"].as_u64(), Some(1_181));
    near(
        v["total"]["attention_hours"].as_f64().unwrap(),
        7.6 + 41.0 * 30.0 / 3600.0,
        1e-9,
    );
    assert_eq!(v["skipped_lines"].as_u64(), Some(1));
    assert!(v["files"].as_array().unwrap().len() > 2);
    assert!(v["rule"].as_str().unwrap().contains("median"));
    // Without --since the 50 old (and long) questions count too.
    let v: Value = serde_json::from_str(&stdout(report(&path, &["--format", "json"]))).unwrap();
    assert_eq!(v["tools"][0]["asked"].as_u64(), Some(1_190));
    assert!(v["tools"][0]["attention_hours"].as_f64().unwrap() > 7.6 + 50.0 / 6.0);
}

#[test]
fn table_is_aligned_ordered_and_states_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let path = seed_log(dir.path());
    let full = stdout(report(&path, &["--since", "30d"]));
    let (text, suggestions) = full.split_once("\nSuggestions").unwrap();
    // The seed's redundant room names: a precise error saves their 4.7 hours.
    assert!(
        suggestions.contains("rooms / book_meeting_room: saves 4:41:12"),
        "{suggestions}"
    );
    assert!(
        suggestions.contains("model_owned = [\"room_id\"]"),
        "{suggestions}"
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.contains(BOOKING) || l.contains("create_invoice") || l.starts_with(' '))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(
        rows[0],
        [
            "rooms", BOOKING, "1140", "24.0", rows[0][4], "9.0", "3.5", "1.8", "0.0", "0.0", "0",
            "61.7", "7:36:00", "4:41:12"
        ],
        "{text}"
    );
    assert_eq!(rows[1][1], "create_invoice");
    assert_eq!(&rows[2][..2], ["TOTAL", "1181"]);
    let header = text.lines().find(|l| l.starts_with("route")).unwrap();
    let row = text.lines().find(|l| l.contains(BOOKING)).unwrap();
    assert_eq!(
        header.find("redundant h:mm:ss").map(|i| i + 17),
        Some(row.len()),
        "{text}"
    );
    // Every column names its unit in the header; the cells are bare numbers
    // in it, whatever their size.
    for unit in [
        "median s",
        "p90 s",
        "unanswered %",
        "declined %",
        "cancelled %",
        "denied %",
        "invalid %",
        "redundant %",
        "attention h:mm:ss",
        "redundant h:mm:ss",
    ] {
        assert!(header.contains(unit), "{unit:?} in {header:?}");
    }
    for cell in row.split_whitespace().skip(2) {
        assert!(
            cell.chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ':'),
            "cell {cell:?} carries a unit of its own: {text}"
        );
    }
    assert!(text.contains("charged at the median"), "{text}");
    assert!(text.contains("103 question(s) charged"), "{text}");
}

/// Denied and invalid answers have columns of their own, re-asks count as
/// questions (each attempt cost a look), small durations read as seconds or
/// minutes, and an empty window is zero, never `-0.00`.
#[test]
fn the_table_shows_denied_invalid_reasks_and_small_durations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let now = SystemTime::now();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sink = runtime.block_on(async { AuditSink::start(&AuditConfig::new(&path)).unwrap() });
    let mut reask = record(now, "create_ticket", Outcome::Invalid, Some(4_000), false);
    reask.reask = true;
    reask.rule = Some("maximum".into());
    for r in [
        reask,
        record(now, "create_ticket", Outcome::Accepted, Some(2_500), false),
        record(now, "create_ticket", Outcome::Denied, Some(1_500), false),
        record(
            now,
            "create_ticket",
            Outcome::Accepted,
            Some(200_000),
            false,
        ),
    ] {
        sink.record(r);
    }
    runtime.block_on(sink.close()).unwrap();
    let text = stdout(report(&path, &[]));
    let header: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("route"))
        .unwrap()
        .split_whitespace()
        .collect();
    for col in ["denied", "invalid", "reasks"] {
        assert!(header.contains(&col), "{text}");
    }
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.contains("create_ticket"))
        .unwrap()
        .split_whitespace()
        .collect();
    // asked, ..., denied %, invalid %, reasks, redundant %, attention, redundant
    assert_eq!(row[2], "4", "{text}");
    assert_eq!(&row[8..11], ["25.0", "25.0", "1"], "{text}");
    // 4 + 2.5 + 1.5 + 200 s = 208 s, in the same h:mm:ss as hours of it.
    assert_eq!(row[12], "0:03:28", "{text}");
    assert_eq!(row[13], "0:00:00", "{text}");
    let v: Value = serde_json::from_str(&stdout(report(&path, &["--format", "json"]))).unwrap();
    assert_eq!(v["tools"][0]["reasks"].as_u64(), Some(1));
    near(
        v["tools"][0]["attention_hours"].as_f64().unwrap(),
        208.0 / 3600.0,
        1e-9,
    );

    // An empty window (the future): zeros, never `-0.00`.
    let table = stdout(report(&path, &["--since", "2100-01-01T00:00:00Z"]));
    let total = table.lines().find(|l| l.contains("TOTAL")).unwrap();
    assert!(!total.contains("-0"), "negative zero: {table}");
    let csv = stdout(report(
        &path,
        &["--format", "csv", "--since", "2100-01-01T00:00:00Z"],
    ));
    assert!(!csv.lines().last().unwrap().contains("-0"), "{csv}");
}

#[test]
fn csv_has_a_header_a_row_per_tool_and_totals() {
    let dir = tempfile::tempdir().unwrap();
    let path = seed_log(dir.path());
    let text = stdout(report(&path, &["--format", "csv", "--since", "30d"]));
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    let col = |name: &str| lines[0].iter().position(|c| *c == name).unwrap();
    let cell = |row: usize, name: &str| lines[row][col(name)].parse::<f64>().unwrap();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[1][col("tool")], BOOKING);
    assert_eq!(cell(1, "asked"), 1140.0);
    assert_eq!(cell(1, "median_s"), 24.0);
    near(cell(1, "attention_hours"), 7.6, 0.05);
    near(cell(1, "redundant_hours"), 4.7, 0.05);
    near(cell(1, "unanswered_pct"), 9.0, 0.05);
    near(cell(1, "redundant_pct"), 61.7, 0.05);
    assert_eq!(lines[3][col("tool")], "TOTAL");
}

#[test]
fn bad_input_fails_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = report(&dir.path().join("missing.jsonl"), &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.jsonl"));
    let path = dir.path().join("a.jsonl");
    std::fs::write(&path, "").unwrap();
    let out = report(&path, &["--since", "last tuesday"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--since"));
    // An empty log is a report of nothing, not an error.
    assert!(stdout(report(&path, &[])).contains("TOTAL"));
}

/// A red-mark re-ask through the real gateway: the broken answer is an audit
/// record of its own (`reask: true`, the rule, outcome `invalid`, never the
/// value), then the accepted one; the report counts both attempts.
#[tokio::test]
async fn a_red_mark_reask_is_an_audit_record_and_costs_attention() {
    use common::*;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[audit]\npath = {}\n\
         [[route]]\nname = \"rooms\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\ncommand = [{}]\n",
        toml_path(&audit),
        toml_path(&repo().join("policies/rooms.toml")),
        toml_path(&rooms_bin()),
    );
    let gw = TestGateway::start(&config).await;
    let op =
        Op::tool("create_ticket", json!({"title": "printer"})).caps(json!({"elicitation": {}}));
    let priorities = [9, 3];
    let resps = op
        .walk(&gw, 2, |round, q| {
            q.reply(
                "priority",
                accepted(json!({"priority": priorities[round - 1]})),
            )
        })
        .await;
    assert_eq!(
        resps[2].result()["resultType"],
        "complete",
        "{}",
        resps[2].raw
    );
    gw.stop().await;
    let text = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["reask"], true, "{text}");
    assert_eq!(lines[0]["rule"], "maximum");
    assert_eq!(lines[0]["outcome"], "invalid");
    assert_eq!(lines[0]["verdict"], "policy_invalid_answer");
    assert!(lines[0]["answer_ms"].is_u64());
    assert!(lines[1].get("reask").is_none(), "{text}");
    assert_eq!(lines[1]["outcome"], "accepted");
    assert_eq!(lines[0]["operation"], lines[1]["operation"]);
    for l in &lines {
        assert!(
            l.get("value").is_none() && l.get("content").is_none(),
            "a value in the audit: {l}"
        );
    }
    let v: Value = serde_json::from_str(&stdout(report(&audit, &["--format", "json"]))).unwrap();
    let t = &v["tools"][0];
    assert_eq!(
        (t["asked"].as_u64(), t["reasks"].as_u64()),
        (Some(2), Some(1)),
        "{v:#}"
    );
    near(t["invalid_pct"].as_f64().unwrap(), 50.0, 1e-9);
}

/// `--by origin`: each tool split into a native server's own questions and
/// the pushes redmark converted, each part priced on its own median; the
/// default report keeps one row per tool.
#[test]
fn by_origin_splits_native_from_converted_questions() {
    use redmark::telemetry::audit::Origin;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sink = AuditSink::start(&AuditConfig::new(&path)).unwrap();
    let now = SystemTime::now();
    for (ms, native) in [
        (10_000, true),
        (20_000, true),
        (30_000, true),
        (60_000, false),
    ] {
        let mut r = record(now, BOOKING, Outcome::Accepted, Some(ms), false);
        r.origin = native.then_some(Origin::Native);
        sink.record(r);
    }
    let mut unanswered = record(now, BOOKING, Outcome::Unanswered, None, false);
    unanswered.origin = Some(Origin::Native);
    sink.record(unanswered);
    runtime.block_on(sink.close()).unwrap();

    let text = stdout(report(&path, &["--format", "csv", "--by", "origin"]));
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        lines[0][..4],
        ["route", "tool", "origin", "asked"],
        "{text}"
    );
    let col = |name: &str| lines[0].iter().position(|c| *c == name).unwrap();
    let row = |origin: &str| {
        lines
            .iter()
            .find(|l| l[col("origin")] == origin)
            .unwrap_or_else(|| panic!("no {origin} row in {text}"))
    };
    let native = row("native");
    assert_eq!(native[col("asked")], "4");
    assert_eq!(native[col("median_s")], "20.000");
    assert_eq!(native[col("unanswered_pct")], "25.00");
    let converted = row("converted");
    assert_eq!(converted[col("asked")], "1");
    assert_eq!(converted[col("median_s")], "60.000");
    assert_eq!(lines.last().unwrap()[col("tool")], "TOTAL");
    assert_eq!(lines.len(), 4, "{text}");

    let json: Value = serde_json::from_str(&stdout(report(
        &path,
        &["--format", "json", "--by", "origin"],
    )))
    .unwrap();
    assert_eq!(json["by"], "origin");
    assert_eq!(json["tools"].as_array().unwrap().len(), 2, "{json}");
    let table = stdout(report(&path, &["--by", "origin"]));
    assert!(
        table
            .lines()
            .any(|l| l.contains("native") && l.contains(BOOKING)),
        "{table}"
    );

    // Without --by: one row, no origin column.
    let text = stdout(report(&path, &["--format", "csv"]));
    assert!(!text.lines().next().unwrap().contains("origin"), "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");
    let json: Value = serde_json::from_str(&stdout(report(&path, &["--format", "json"]))).unwrap();
    assert_eq!(json["tools"][0]["native"], 4);
    assert_eq!(json["tools"][0]["converted"], 1);
    assert!(json["tools"][0].get("origin").is_none());
}

/// Names a hostile server or client chose, through the real binary: the
/// table prints none of their control or bidi characters raw, every policy
/// line it suggests parses (with redmark's own policy parser) to exactly the
/// tool and field it names, the CSV holds no live formula, and the page
/// neither.
#[test]
fn hostile_names_reach_no_terminal_spreadsheet_or_policy_raw() {
    const INJECTED: &str = "room\"]\n[defaults]\nmode = \"replay\"\n#";
    const FORMULA: &str = "=HYPERLINK(\"http://evil.example/\",\"open\")";
    let names = [
        ("files.read", INJECTED),
        (FORMULA, "title\u{1b}]0;pwned\u{7}\u{1b}[2J\r"),
        ("rtl\u{202e}gnp.exe\u{9b}", "a\"\u{2066}b"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sink = AuditSink::start(&AuditConfig::new(&path)).unwrap();
    for (tool, field) in names {
        for _ in 0..20 {
            let mut r = record(
                SystemTime::now(),
                tool,
                Outcome::Accepted,
                Some(9_000),
                true,
            );
            r.fields = vec![field.into()];
            r.redundant_fields = vec![field.into()];
            sink.record(r);
        }
    }
    runtime.block_on(sink.close()).unwrap();
    let acts = |c: char| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };

    let text = stdout(report(&path, &[]));
    let raw: Vec<char> = text.chars().filter(|c| acts(*c)).collect();
    assert!(raw.is_empty(), "{raw:?} reached the terminal:\n{text}");
    assert!(text.contains(r"title\u001B]0;pwned\u0007"), "{text}");
    assert!(text.contains(r"rtl\u202Egnp.exe\u009B"), "{text}");
    // Each suggestion's policy lines, as printed, name its tool and field.
    let (_, suggestions) = text.split_once("\nSuggestions").unwrap();
    let blocks: Vec<&str> = suggestions.split("\n\n").skip(1).collect();
    assert_eq!(blocks.len(), names.len(), "{suggestions}");
    let base = redmark::policy::Defaults::default();
    for (tool, field) in names {
        let block = blocks
            .iter()
            .find(|b| {
                b.contains(&format!(
                    "billing / {}:",
                    redmark::telemetry::visible::visible(tool)
                ))
            })
            .unwrap_or_else(|| panic!("no suggestion for {tool:?}:\n{suggestions}"));
        let lines: Vec<&str> = block
            .lines()
            .filter_map(|l| l.strip_prefix("     "))
            .collect();
        let policy = redmark::policy::Policy::parse(&lines.join("\n"), "pasted.toml")
            .unwrap_or_else(|e| panic!("{e}\n{block}"));
        assert_eq!(policy.tools.keys().collect::<Vec<_>>(), [tool], "{block}");
        assert_eq!(
            policy.tools[tool].model_owned,
            [field.to_owned()].into(),
            "{block}"
        );
        assert_eq!(policy.defaults.mode, base.mode, "{block}");
    }
    assert!(text.contains(r#"[tool."files.read"]"#), "{text}");

    // CSV: the formula is text, behind a `'`, quoted; no cell starts one.
    let csv = stdout(report(&path, &["--format", "csv"]));
    assert!(
        csv.contains(r#"billing,"'=HYPERLINK(""http://evil.example/"",""open"")","#),
        "{csv}"
    );
    assert!(!csv.contains(",=") && !csv.contains(",\"="), "{csv}");

    let html = stdout(report(&path, &["--format", "html"]));
    let raw: Vec<char> = html.chars().filter(|c| acts(*c)).collect();
    assert!(raw.is_empty(), "{raw:?} in the page");
    assert!(html.contains("[tool.&quot;files.read&quot;]"), "{html}");
}
