//! The report as text for people (an aligned table, then the suggestions)
//! and as CSV for spreadsheets.
//!
//! Names in the audit log are chosen by servers and clients: in text every
//! one is printed through [`visible`] (no escape sequence reaches the
//! terminal), and in CSV a name a spreadsheet would run as a formula is
//! neutralised ([`csv_text`]).

use std::fmt::Write as _;

use super::report::{ATTENTION_RULE, By, Report, ToolCost};
use super::suggest::Suggestion;
use super::visible::visible;

/// The suggestions under the table, most attention saved first.
pub(super) fn suggestions_text(suggestions: &[Suggestion]) -> String {
    let mut out = String::from("\nSuggestions (most attention saved first):\n");
    if suggestions.is_empty() {
        out.push_str("  none: no rule met its threshold on enough questions.\n");
    }
    for (i, s) in suggestions.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n{}. {} / {}: saves {} (h:mm:ss)\n   {}\n   evidence: {}",
            i + 1,
            visible(&s.route),
            visible(&s.tool),
            hours_cell(s.hours_saved),
            // Escaped before the wrap, so an escape is one word.
            wrap(&visible(&s.change), 76).replace('\n', "\n   "),
            visible(&s.evidence)
        );
        if !s.policy.is_empty() {
            out.push_str("   add to the policy:\n");
            for line in &s.policy {
                // Written printable already (policy_lines): unchanged here.
                let _ = writeln!(out, "     {}", visible(line));
            }
        }
    }
    out
}

/// Table cells are rounded for reading, CSV cells less so.
#[derive(Clone, Copy)]
enum Cells {
    Table,
    Csv,
}

fn secs(v: Option<f64>, p: usize) -> String {
    v.map_or_else(|| "-".into(), |s| format!("{s:.p$}"))
}

const COLUMNS: [&str; 14] = [
    "route",
    "tool",
    "asked",
    "median_s",
    "p90_s",
    "unanswered_pct",
    "declined_pct",
    "cancelled_pct",
    "denied_pct",
    "invalid_pct",
    "reasks",
    "redundant_pct",
    "attention_hours",
    "redundant_hours",
];

/// Attention for reading, in the table's `h:mm:ss` columns: `0:00:24`,
/// `0:03:28`, `7:36:00`. One unit for every row, so a column never mixes
/// seconds, minutes and decimal hours (a cell read `0.2s` under "hours");
/// whole seconds, because what a report weighs is minutes and hours of
/// people's time. JSON and CSV keep decimal hours.
pub fn hours_cell(h: f64) -> String {
    // Rounded and clamped to be non-negative before the cast: it cannot wrap,
    // and u64 seconds outlast any audit log.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let whole = (h * 3600.0).round().max(0.0) as u64;
    format!("{}:{:02}:{:02}", whole / 3600, whole / 60 % 60, whole % 60)
}

/// The leading cells of a row that hold names (route, tool); the rest are
/// numbers redmark wrote, and `origin` is one of its own two words.
const NAMES: usize = 2;

/// The cells of one row; the `origin` column third under [`By::Origin`].
fn row(t: &ToolCost, how: Cells, by: By) -> Vec<String> {
    let mut row = cells(t, how).to_vec();
    // The route and tool cells are names; CSV neutralises them in `csv`.
    if let Cells::Table = how {
        for name in &mut row[..NAMES] {
            *name = visible(name).into_owned();
        }
    }
    if by == By::Origin {
        row.insert(2, t.origin.unwrap_or("").to_owned());
    }
    row
}

/// The header row (`head`), with `origin` third under [`By::Origin`].
fn header(head: &[&str], by: By) -> Vec<String> {
    let mut row: Vec<String> = head.iter().map(|h| (*h).to_owned()).collect();
    if by == By::Origin {
        row.insert(2, "origin".into());
    }
    row
}

fn cells(t: &ToolCost, how: Cells) -> [String; 14] {
    // The unit is in the header (`median s`, `declined %`, `attention
    // h:mm:ss`), never in a cell: every cell of a column reads the same way.
    let (s, p, h) = match how {
        Cells::Table => (1, 1, 2),
        Cells::Csv => (3, 2, 4),
    };
    [
        t.route.clone(),
        t.tool.clone(),
        t.asked.to_string(),
        secs(t.median_s, s),
        secs(t.p90_s, s),
        format!("{:.p$}", t.unanswered_pct),
        format!("{:.p$}", t.declined_pct),
        format!("{:.p$}", t.cancelled_pct),
        format!("{:.p$}", t.denied_pct),
        format!("{:.p$}", t.invalid_pct),
        t.reasks.to_string(),
        format!("{:.p$}", t.redundant_pct),
        match how {
            Cells::Table => hours_cell(t.attention_hours),
            Cells::Csv => format!("{:.h$}", t.attention_hours),
        },
        match how {
            Cells::Table => hours_cell(t.redundant_hours),
            Cells::Csv => format!("{:.h$}", t.redundant_hours),
        },
    ]
}

/// Greedy word wrap for the notes under the table.
pub(super) fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}

/// Aligned text for people.
pub fn table(r: &Report) -> String {
    let head = [
        "route",
        "tool",
        "asked",
        "median s",
        "p90 s",
        "unanswered %",
        "declined %",
        "cancelled %",
        "denied %",
        "invalid %",
        "reasks",
        "redundant %",
        "attention h:mm:ss",
        "redundant h:mm:ss",
    ];
    let mut rows = vec![header(&head, r.by)];
    rows.extend(r.tools.iter().map(|t| row(t, Cells::Table, r.by)));
    rows.push(row(&r.total, Cells::Table, r.by));
    let left = if r.by == By::Origin { 2 } else { 1 };
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::from("What the questions cost people");
    if let Some(s) = &r.since {
        let _ = write!(out, " (since {s})");
    }
    out.push_str("\n\n");
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c <= left {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\n{}\n{} question(s) charged at the median; {} file(s) read, {} line(s) skipped.",
        wrap(ATTENTION_RULE, 80),
        r.total.imputed,
        r.files.len(),
        r.skipped_lines
    );
    out
}

pub(super) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A CSV cell holding a name. A spreadsheet runs a cell that starts with
/// `=`, `+`, `-` or `@` (or tab or CR before one) as a formula
/// (`=HYPERLINK(...)`, DDE): as OWASP advises, such a cell gets a leading
/// `'`, which makes it text, and is quoted with its quotes doubled.
pub(super) fn csv_text(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("\"'{}\"", s.replace('"', "\"\""))
    } else {
        csv_field(s)
    }
}

/// One row per tool and a last `TOTAL` row; shares in percent, no `%` sign.
pub fn csv(r: &Report) -> String {
    let mut out = header(&COLUMNS, r.by).join(",") + "\n";
    for t in r.tools.iter().chain([&r.total]) {
        let row: Vec<String> = row(t, Cells::Csv, r.by)
            .iter()
            .enumerate()
            .map(|(i, c)| if i < NAMES { csv_text(c) } else { csv_field(c) })
            .collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}
