//! Tests of [`super`]: the report arithmetic (median, p90, attention charged
//! to unanswered questions, ordering) and `--since`.

use super::*;
use crate::telemetry::report_text::{csv_field, csv_text, wrap};
use crate::telemetry::visible::{HOSTILE_NAMES, is_unsafe};
use std::time::Duration;

fn q(tool: &str, outcome: Outcome, answer_ms: Option<u64>, redundant: bool) -> Question {
    Question {
        time: "2026-01-01T00:00:00.000Z".into(),
        route: "r".into(),
        tool: tool.into(),
        outcome,
        answer_ms,
        redundant,
        reask: false,
        origin: None,
        key: "k".into(),
        principal: "alice".into(),
        operation: String::new(),
        fields: Vec::new(),
        redundant_fields: Vec::new(),
        repeated_fields: Vec::new(),
        verdict: "ok".into(),
        rule: None,
    }
}

#[test]
fn attention_reads_as_h_mm_ss_at_every_size() {
    assert_eq!(hours_cell(0.0), "0:00:00");
    assert_eq!(hours_cell(0.4 / 3600.0), "0:00:00");
    assert_eq!(hours_cell(24.0 / 3600.0), "0:00:24");
    assert_eq!(hours_cell(59.6 / 3600.0), "0:01:00");
    assert_eq!(hours_cell(65.0 / 3600.0), "0:01:05");
    assert_eq!(hours_cell(0.099), "0:05:56");
    assert_eq!(hours_cell(7.6), "7:36:00");
    assert_eq!(hours_cell(123.5), "123:30:00");
    assert_eq!(hours_cell(-0.0), "0:00:00");
}

#[test]
fn an_empty_report_has_no_negative_zero() {
    let (tools, total) = summarize(&[]);
    assert!(tools.is_empty());
    assert!(total.attention_hours.is_sign_positive());
    assert!(total.redundant_hours.is_sign_positive());
}

#[test]
fn median_and_nearest_rank_percentile() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[5]), Some(5.0));
    assert_eq!(median(&[1, 2, 3, 10]), Some(2.5));
    let v: Vec<u64> = (1..=10).collect();
    assert_eq!(percentile(&v, 90.0), Some(9.0));
    assert_eq!(percentile(&v, 100.0), Some(10.0));
    assert_eq!(percentile(&[7], 90.0), Some(7.0));
    assert_eq!(percentile(&[], 90.0), None);
}

#[test]
fn unanswered_questions_cost_the_median_and_refused_ones_nothing() {
    use Outcome::*;
    let qs = [
        q("a", Accepted, Some(10_000), true),
        q("a", Declined, Some(30_000), false),
        q("a", Accepted, Some(20_000), true),
        q("a", Unanswered, None, false),
        q("a", Abandoned, None, false),
        q("a", Refused, None, false),
    ];
    let refs: Vec<&Question> = qs.iter().collect();
    let c = cost("r", "a", &refs, 99_000.0);
    assert_eq!((c.asked, c.answered, c.imputed, c.redundant), (6, 3, 2, 2));
    assert_eq!(c.median_s, Some(20.0));
    assert!((c.attention_hours * 3600.0 - 100.0).abs() < 1e-9); // 10+30+20 + 2×20
    assert!((c.redundant_hours * 3600.0 - 30.0).abs() < 1e-9);
    assert!((c.unanswered_pct - 100.0 / 6.0).abs() < 1e-9);
    assert!((c.redundant_pct - 100.0 / 3.0).abs() < 1e-9);
    // No answered question: the fallback (the median over all tools).
    let lone = q("b", Unanswered, None, false);
    let c = cost("r", "b", &[&lone], 99_000.0);
    assert!((c.attention_hours * 3600.0 - 99.0).abs() < 1e-9);
    assert_eq!(c.median_s, None);
}

#[test]
fn tools_ordered_by_attention_with_totals() {
    use Outcome::*;
    let mut qs = vec![q("cheap", Accepted, Some(1_000), false); 5];
    qs.push(q("dear", Accepted, Some(60_000), false));
    qs.push(q("dear", Unanswered, None, false));
    let (tools, total) = summarize(&qs);
    let names: Vec<&str> = tools.iter().map(|t| t.tool.as_str()).collect();
    assert_eq!(names, ["dear", "cheap"]);
    assert_eq!(total.asked, 7);
    assert!((total.attention_hours * 3600.0 - 125.0).abs() < 1e-9);
    assert_eq!(total.median_s, Some(1.0));
}

#[test]
fn since_takes_durations_and_timestamps() {
    let now = humantime::parse_rfc3339("2026-02-01T00:00:00Z").unwrap();
    assert_eq!(
        parse_since("24h", now).unwrap(),
        now - Duration::from_secs(86_400)
    );
    let t = parse_since("2026-01-15T12:00:00Z", now).unwrap();
    assert_eq!(
        humantime::format_rfc3339_seconds(t).to_string(),
        "2026-01-15T12:00:00Z"
    );
    assert!(matches!(
        parse_since("yesterday", now),
        Err(ReportError::Since(_))
    ));
}

#[test]
fn csv_quotes_what_needs_quoting() {
    assert_eq!(csv_field("plain"), "plain");
    assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
}

#[test]
fn notes_wrap_at_word_boundaries() {
    assert_eq!(wrap("aa bb cc dd", 5), "aa bb\ncc dd");
    assert!(wrap(ATTENTION_RULE, 80).lines().all(|l| l.len() <= 80));
}

#[test]
fn rotated_files_come_first_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("a.jsonl");
    for p in [live.clone(), rotated(&live, 1), rotated(&live, 2)] {
        std::fs::write(p, "").unwrap();
    }
    let files = audit_files(&[live.clone(), rotated(&live, 1)]);
    assert_eq!(files, [rotated(&live, 2), rotated(&live, 1), live]);
}

#[test]
fn native_and_converted_questions_are_counted_apart() {
    let mut native = q("book", Outcome::Accepted, Some(1000), false);
    native.origin = Some(Origin::Native);
    let line = r#"{"time":"2026-01-01T00:00:00.000Z","route":"r","tool":"book","outcome":"accepted","answer_ms":5,"origin":"native"}"#;
    let parsed: Question = serde_json::from_str(line).unwrap();
    assert_eq!(parsed.origin, Some(Origin::Native));
    let (tools, total) = summarize(&[native, q("book", Outcome::Declined, Some(2000), false)]);
    assert_eq!((tools[0].native, tools[0].converted), (1, 1));
    assert_eq!((total.native, total.converted), (1, 1));
}

#[test]
fn the_tail_read_is_bounded_and_drops_the_cut_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let line = |n: u64| {
        format!(
            "{{\"time\":\"2026-01-01T00:00:00.000Z\",\"route\":\"r\",\"tool\":\"t{n}\",\"outcome\":\"accepted\",\"answer_ms\":{n}}}\n"
        )
    };
    let old: String = (0..10).map(line).collect();
    let new: String = (10..20).map(line).collect();
    std::fs::write(rotated(&path, 1), &old).unwrap();
    std::fs::write(&path, &new).unwrap();
    let files = audit_files(std::slice::from_ref(&path));
    // Everything fits: oldest first, nothing left out.
    let (qs, skipped, truncated) = read_tail(&files, None, 1 << 20).unwrap();
    assert_eq!((qs.len(), skipped, truncated), (20, 0, false));
    assert_eq!(qs[0].tool, "t0");
    // Room for the newest file and part of a line of the older one: the cut
    // line is dropped, not counted as skipped, and the read says it stopped.
    let budget = new.len() as u64 + 10;
    let (qs, skipped, truncated) = read_tail(&files, None, budget).unwrap();
    assert_eq!((qs.len(), skipped, truncated), (10, 0, true));
    assert_eq!(qs[0].tool, "t10");
    // Less than one file: only whole newest lines.
    let one = line(19).len() as u64;
    let (qs, _, truncated) = read_tail(&files, None, one * 3 + 5).unwrap();
    assert_eq!(
        qs.iter().map(|q| q.tool.as_str()).collect::<Vec<_>>(),
        ["t17", "t18", "t19"]
    );
    assert!(truncated);
}

/// For each hostile name: 20 accepted answers of a field of that name, all
/// already in the arguments (`model_owned`), and 20 re-asks breaking a rule
/// of that name (show the bound), on a tool and route of that name.
fn hostile_questions() -> Vec<Question> {
    let mut qs = Vec::new();
    for name in HOSTILE_NAMES {
        for i in 0..40 {
            let mut x = q(name, Outcome::Accepted, Some(1_000), true);
            x.route = name.into();
            x.key = name.into();
            x.fields = vec![name.into()];
            x.redundant_fields = vec![name.into()];
            x.operation = format!("op-{i}");
            if i >= 20 {
                x.outcome = Outcome::Invalid;
                x.reask = true;
                x.rule = Some(name.into());
            }
            qs.push(x);
        }
    }
    qs
}

fn hostile_report() -> Report {
    let r = build(
        &hostile_questions(),
        By::Tool,
        None,
        Vec::new(),
        0,
        &Thresholds::default(),
    )
    .unwrap();
    let kinds: Vec<_> = r.suggestions.iter().map(|s| s.kind).collect();
    assert_eq!(kinds.len(), 2 * HOSTILE_NAMES.len(), "{kinds:?}");
    r
}

#[test]
fn the_text_report_escapes_every_name() {
    let text = render(&hostile_report(), Format::Table).unwrap();
    let acting: Vec<char> = text
        .chars()
        .filter(|c| is_unsafe(*c) && *c != '\n')
        .collect();
    assert!(acting.is_empty(), "{acting:?} in\n{text}");
    // Seen as escapes: in the table, a suggestion's heading, its sentence
    // (the rule's name) and its policy lines.
    for shown in [
        r"bell\u0007\u001B]0;pwned\u0007\u001B[2J",
        r"c1\u009B31m\u0085",
        r"rtl\u202Egnp.exe",
        r"line\u2028sep\uFEFF",
        r"tag\U000E0041\U000E0042",
        r"people do not see the `back\slash\u2066iso\u2069` bound",
        r#"[tool."rtl\u202Egnp.exe"]"#,
    ] {
        assert!(text.contains(shown), "{shown} not in\n{text}");
    }
    // No name breaks a row: a header, a row per tool, the totals.
    let (table, _) = text.split_once("\n\nattention =").unwrap();
    assert_eq!(
        table.lines().count(),
        2 + 1 + HOSTILE_NAMES.len() + 1,
        "{table}"
    );
}

/// A minimal RFC 4180 reader: rows of cells, quotes undone.
fn read_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut cell) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    rows
}

#[test]
fn csv_neutralises_formulas_as_owasp_advises() {
    assert_eq!(csv_text("book"), "book");
    assert_eq!(csv_text("a,b"), "\"a,b\"");
    for f in ["=1+2", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"] {
        assert_eq!(csv_text(f), format!("\"'{f}\""));
    }
    assert_eq!(
        csv_text("=HYPERLINK(\"http://evil.example/\",\"open\")"),
        "\"'=HYPERLINK(\"\"http://evil.example/\"\",\"\"open\"\")\""
    );
    // A formula sign inside a name is no formula.
    assert_eq!(csv_text("a=1"), "a=1");

    let r = hostile_report();
    let rows = read_csv(&csv(&r));
    assert_eq!(rows.len(), 1 + HOSTILE_NAMES.len() + 1);
    let mut names: Vec<&str> = Vec::new();
    for row in &rows[1..] {
        assert_eq!(row.len(), rows[0].len(), "{row:?}");
        for cell in &row[..2] {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "a formula: {cell:?}"
            );
        }
        // The name is all there, behind a `'` when it looked like a formula.
        let tool = row[1].as_str();
        names.push(
            tool.strip_prefix('\'')
                .filter(|t| t.starts_with(['=', '+', '-', '@', '\t', '\r']))
                .unwrap_or(tool),
        );
        if tool != "TOTAL" {
            assert_eq!(row[0], row[1], "route and tool are the same name");
        }
    }
    for name in HOSTILE_NAMES {
        assert!(names.contains(&name), "{name:?} lost: {names:?}");
    }
    assert!(names.contains(&"TOTAL"));
}

#[test]
fn the_page_escapes_every_name() {
    let html = super::super::report_html::page(&hostile_report());
    let acting: Vec<char> = html
        .chars()
        .filter(|c| is_unsafe(*c) && *c != '\n')
        .collect();
    assert!(acting.is_empty(), "{acting:?}");
    assert!(!html.contains("<script"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;"));
    assert!(html.contains(r"rtl\u202Egnp.exe"));
    // The policy lines, one per line, as the text report prints them.
    assert!(
        html.contains(r"[tool.&quot;rtl\u202Egnp.exe&quot;]"),
        "{html}"
    );
}
