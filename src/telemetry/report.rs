//! `redmark report`: what the questions cost people, per tool, from the
//! audit log ([`super::audit`]).
//!
//! Per route and tool, most expensive first: questions asked, median and p90
//! answer time, the shares unanswered / declined / cancelled / denied /
//! invalid / redundant, red-mark re-asks, and the hours of people's attention
//! spent, in total and on redundant questions.
//!
//! A re-ask (an answer that broke a rule, asked again with a red mark) is an
//! audit record of its own (`reask: true`, outcome `invalid`, the time spent
//! on that attempt): each attempt is counted as asked and charged its time.
//!
//! Attention ([`ATTENTION_RULE`]): an answered question costs its measured
//! answer time. A question that reached a person but got no answer
//! (unanswered, abandoned) still cost attention — someone saw the dialog — and
//! is charged the tool's median answer time (the median over all tools if the
//! tool has no answered question). A `refused` question never reached anyone
//! and costs nothing. This is the arithmetic of "N dialogs at a median of 24 s".

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::audit::{Origin, Outcome, rotated};
use super::report_text::suggestions_text;
pub use super::report_text::{csv, hours_cell, table};
use super::suggest::{Suggestion, Thresholds, suggest};

/// How attention hours are counted; printed with every report.
pub const ATTENTION_RULE: &str = "attention = measured answer time of answered questions, plus the \
tool's median answer time for each question that reached a person but was never answered \
(unanswered, abandoned): someone still saw the dialog. Refused questions reached nobody and \
cost nothing.";

/// How questions are grouped: per route and tool, or also by origin (a
/// native server's own questions apart from pushes redmark converted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum By {
    #[default]
    Tool,
    Origin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
    /// One self-contained page (inline CSS and SVG).
    Html,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    // Each message says its cause, which is therefore not also its `source()`.
    #[error("cannot read {}: {cause}", path.display())]
    Read { path: PathBuf, cause: io::Error },
    #[error("cannot write the report as JSON: {0}")]
    Json(serde_json::Error),
    #[error("--since {0:?}: expected a duration back from now (24h, 7d) or an RFC 3339 UTC time")]
    Since(String),
    #[error("--{0} {1}: expected a share from 0 to 1")]
    Share(&'static str, f64),
}

/// What the report needs from one audit line (other fields are ignored).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Question {
    pub time: String,
    #[serde(default)]
    pub route: String,
    pub tool: String,
    pub outcome: Outcome,
    pub answer_ms: Option<u64>,
    #[serde(default)]
    pub redundant: bool,
    #[serde(default)]
    pub reask: bool,
    /// `native` for a 2026-07-28 server's own question; absent when converted.
    #[serde(default)]
    pub origin: Option<Origin>,
    /// The input request key.
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub principal: String,
    #[serde(default)]
    pub operation: String,
    /// Field names of the form.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Accepted fields whose value was already in the call's arguments.
    #[serde(default)]
    pub redundant_fields: Vec<String>,
    /// Accepted fields whose value was this principal's previous answer.
    #[serde(default)]
    pub repeated_fields: Vec<String>,
    #[serde(default)]
    pub verdict: String,
    /// The rule a re-asked answer broke.
    #[serde(default)]
    pub rule: Option<String>,
}

/// The cost of one tool's questions (or of all, in the totals line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCost {
    pub route: String,
    pub tool: String,
    /// `native` or `converted`, with `--by origin` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<&'static str>,
    pub asked: u64,
    /// Distinct operations that asked these questions.
    pub operations: u64,
    /// Questions with a measured answer time.
    pub answered: u64,
    /// Questions charged the median because no answer time was measured.
    pub imputed: u64,
    pub redundant: u64,
    /// Attempts whose answer broke a rule and were asked again.
    pub reasks: u64,
    /// Of `asked`, by mode: a native server's own questions, and pushes
    /// redmark converted from a legacy session.
    pub native: u64,
    pub converted: u64,
    pub outcomes: BTreeMap<Outcome, u64>,
    pub median_s: Option<f64>,
    pub p90_s: Option<f64>,
    pub unanswered_pct: f64,
    pub declined_pct: f64,
    pub cancelled_pct: f64,
    pub denied_pct: f64,
    /// Answers that broke a rule: re-asked, or ending the operation.
    pub invalid_pct: f64,
    pub redundant_pct: f64,
    pub attention_hours: f64,
    pub redundant_hours: f64,
    /// Of `attention_hours`: questions that reached a person and got no
    /// answer, charged the median.
    pub unanswered_hours: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub since: Option<String>,
    pub files: Vec<PathBuf>,
    /// Lines that were not audit records (or had no readable time).
    pub skipped_lines: u64,
    pub rule: &'static str,
    pub by: By,
    pub tools: Vec<ToolCost>,
    pub total: ToolCost,
    pub thresholds: Thresholds,
    /// Answered questions by answer time (`under 5 s`, ...).
    pub answer_times: Vec<Bucket>,
    /// Per UTC day, oldest first: questions asked and attention spent.
    pub days: Vec<Day>,
    /// The read stopped at a byte bound and older lines were left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// What to change, most attention saved first ([`super::suggest`]).
    pub suggestions: Vec<Suggestion>,
}

/// A bar of the answer-time distribution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bucket {
    pub label: &'static str,
    pub count: u64,
}

/// A day of the trend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Day {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    pub asked: u64,
    pub attention_hours: f64,
}

/// Upper bounds (ms, exclusive) and labels of the answer-time bars.
const BUCKETS: [(u64, &str); 7] = [
    (5_000, "under 5 s"),
    (10_000, "5 to 10 s"),
    (30_000, "10 to 30 s"),
    (60_000, "30 s to 1 min"),
    (120_000, "1 to 2 min"),
    (300_000, "2 to 5 min"),
    (u64::MAX, "5 min or more"),
];

fn answer_times(questions: &[Question]) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = BUCKETS
        .iter()
        .map(|(_, label)| Bucket { label, count: 0 })
        .collect();
    for ms in questions.iter().filter_map(|q| q.answer_ms) {
        if let Some(i) = BUCKETS.iter().position(|(max, _)| ms < *max) {
            out[i].count += 1;
        }
    }
    out
}

/// Per day, each question charged as in its tool's row.
fn days(questions: &[Question]) -> Vec<Day> {
    let mut by_tool: BTreeMap<(&str, &str), Vec<u64>> = BTreeMap::new();
    for q in questions {
        if let Some(ms) = q.answer_ms {
            by_tool.entry((&q.route, &q.tool)).or_default().push(ms);
        }
    }
    let medians: BTreeMap<(&str, &str), f64> = by_tool
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_unstable();
            (k, median(&v).unwrap_or(0.0))
        })
        .collect();
    let mut out: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for q in questions {
        let date: String = q.time.chars().take(10).collect();
        let ms = match q.answer_ms {
            Some(ms) => ms as f64,
            None if q.outcome == Outcome::Refused => 0.0,
            None => medians.get(&(&*q.route, &*q.tool)).copied().unwrap_or(0.0),
        };
        let day = out.entry(date).or_insert((0, 0.0));
        day.0 += 1;
        day.1 += ms;
    }
    out.into_iter()
        .map(|(date, (asked, ms))| Day {
            date,
            asked,
            attention_hours: ms / 3_600_000.0,
        })
        .collect()
}

/// Median of sorted values (mean of the two middle ones for an even count).
pub fn median(sorted: &[u64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2] as f64),
        _ => Some((sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0),
    }
}

/// Nearest-rank percentile (0 < p <= 100) of sorted values.
pub fn percentile(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    // Clamped to 0..=len before the cast, so it neither truncates nor wraps.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let rank = ((p / 100.0) * sorted.len() as f64)
        .ceil()
        .clamp(0.0, sorted.len() as f64) as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1] as f64)
}

fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

/// Prices one group of questions; `fallback_ms` charges unanswered ones when
/// the group has no answered question to take a median from.
pub fn cost(route: &str, tool: &str, qs: &[&Question], fallback_ms: f64) -> ToolCost {
    let mut times: Vec<u64> = qs.iter().filter_map(|q| q.answer_ms).collect();
    times.sort_unstable();
    let med = median(&times);
    let charge = med.unwrap_or(fallback_ms);
    let (mut total_ms, mut redundant_ms, mut imputed) = (0.0, 0.0, 0);
    let mut unanswered_ms = 0.0;
    let mut outcomes = BTreeMap::new();
    for q in qs {
        *outcomes.entry(q.outcome).or_insert(0) += 1;
        let ms = match q.answer_ms {
            Some(ms) => ms as f64,
            None if q.outcome == Outcome::Refused => 0.0,
            None => {
                imputed += 1;
                unanswered_ms += charge;
                charge
            }
        };
        total_ms += ms;
        if q.redundant {
            redundant_ms += ms;
        }
    }
    let asked = qs.len() as u64;
    let count = |o: Outcome| outcomes.get(&o).copied().unwrap_or(0);
    let redundant = qs.iter().filter(|q| q.redundant).count() as u64;
    ToolCost {
        route: route.to_string(),
        tool: tool.to_string(),
        origin: None,
        asked,
        operations: qs
            .iter()
            .map(|q| q.operation.as_str())
            .filter(|o| !o.is_empty())
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64,
        answered: times.len() as u64,
        imputed,
        redundant,
        reasks: qs.iter().filter(|q| q.reask).count() as u64,
        native: qs
            .iter()
            .filter(|q| q.origin == Some(Origin::Native))
            .count() as u64,
        converted: qs
            .iter()
            .filter(|q| q.origin != Some(Origin::Native))
            .count() as u64,
        median_s: med.map(|ms| ms / 1000.0),
        p90_s: percentile(&times, 90.0).map(|ms| ms / 1000.0),
        unanswered_pct: pct(count(Outcome::Unanswered), asked),
        declined_pct: pct(count(Outcome::Declined), asked),
        cancelled_pct: pct(count(Outcome::Cancelled), asked),
        denied_pct: pct(count(Outcome::Denied), asked),
        invalid_pct: pct(count(Outcome::Invalid), asked),
        redundant_pct: pct(redundant, asked),
        attention_hours: total_ms / 3_600_000.0,
        redundant_hours: redundant_ms / 3_600_000.0,
        unanswered_hours: unanswered_ms / 3_600_000.0,
        outcomes,
    }
}

/// Per (route, tool), most attention first, and the totals line.
pub fn summarize(questions: &[Question]) -> (Vec<ToolCost>, ToolCost) {
    summarize_by(questions, By::Tool)
}

fn origin_label(q: &Question) -> &'static str {
    if q.origin == Some(Origin::Native) {
        "native"
    } else {
        "converted"
    }
}

/// [`summarize`], with each tool split by origin under [`By::Origin`] (each
/// part charged its own median).
pub fn summarize_by(questions: &[Question], by: By) -> (Vec<ToolCost>, ToolCost) {
    let mut all: Vec<u64> = questions.iter().filter_map(|q| q.answer_ms).collect();
    all.sort_unstable();
    let fallback = median(&all).unwrap_or(0.0);
    let mut groups: BTreeMap<(&str, &str, Option<&'static str>), Vec<&Question>> = BTreeMap::new();
    for q in questions {
        let origin = (by == By::Origin).then(|| origin_label(q));
        groups
            .entry((&q.route, &q.tool, origin))
            .or_default()
            .push(q);
    }
    let mut tools: Vec<ToolCost> = groups
        .iter()
        .map(|((route, tool, origin), qs)| ToolCost {
            origin: *origin,
            ..cost(route, tool, qs, fallback)
        })
        .collect();
    tools.sort_by(|a, b| {
        b.attention_hours
            .total_cmp(&a.attention_hours)
            .then(b.asked.cmp(&a.asked))
    });
    let everything: Vec<&Question> = questions.iter().collect();
    let mut total = cost("", "TOTAL", &everything, fallback);
    // Sum the tools' charges, which use each tool's own median. From +0.0:
    // an empty sum of f64 is -0.0, which would print as `-0.00`.
    total.attention_hours = tools.iter().fold(0.0, |h, t| h + t.attention_hours);
    total.redundant_hours = tools.iter().fold(0.0, |h, t| h + t.redundant_hours);
    total.unanswered_hours = tools.iter().fold(0.0, |h, t| h + t.unanswered_hours);
    (tools, total)
}

/// `24h`, `7d` (back from `now`) or an RFC 3339 UTC time.
pub fn parse_since(s: &str, now: SystemTime) -> Result<SystemTime, ReportError> {
    let bad = || ReportError::Since(s.to_string());
    if let Ok(d) = humantime::parse_duration(s) {
        return now.checked_sub(d).ok_or_else(bad);
    }
    humantime::parse_rfc3339_weak(s).map_err(|_| bad())
}

/// Each path and its rotated files (`path.1`, `path.2`, … while they exist), oldest first.
pub fn audit_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in paths {
        let mut older: Vec<PathBuf> = (1..)
            .map(|n| rotated(path, n))
            .take_while(|p| p.exists())
            .collect();
        older.reverse();
        older.push(path.clone());
        for f in older {
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    files
}

/// Reads questions newer than `since`; returns them and the count of skipped lines.
pub fn read(
    files: &[PathBuf],
    since: Option<SystemTime>,
) -> Result<(Vec<Question>, u64), ReportError> {
    let (mut questions, mut skipped) = (Vec::new(), 0);
    for path in files {
        let err = |cause| ReportError::Read {
            path: path.clone(),
            cause,
        };
        let file = std::fs::File::open(path).map_err(err)?;
        for line in BufReader::new(file).lines() {
            let line = line.map_err(err)?;
            if line.trim().is_empty() {
                continue;
            }
            let parsed = serde_json::from_str::<Question>(&line)
                .ok()
                .and_then(|q| Some((humantime::parse_rfc3339_weak(&q.time).ok()?, q)));
            match parsed {
                Some((t, q)) if since.is_none_or(|s| t >= s) => questions.push(q),
                Some(_) => {}
                None => skipped += 1,
            }
        }
    }
    Ok((questions, skipped))
}

/// Reads at most `max_bytes` of the newest lines of `files` (oldest first):
/// the admin listener's bounded read. Returns the questions newer than
/// `since`, the skipped lines, and whether older lines were left out.
pub fn read_tail(
    files: &[PathBuf],
    since: Option<SystemTime>,
    max_bytes: u64,
) -> Result<(Vec<Question>, u64, bool), ReportError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut budget = max_bytes;
    let mut truncated = false;
    let mut texts = Vec::new();
    for path in files.iter().rev() {
        let err = |cause| ReportError::Read {
            path: path.clone(),
            cause,
        };
        if budget == 0 {
            truncated = true;
            break;
        }
        let mut file = std::fs::File::open(path).map_err(err)?;
        let len = file.metadata().map_err(err)?.len();
        let start = len.saturating_sub(budget);
        file.seek(SeekFrom::Start(start)).map_err(err)?;
        let mut bytes = Vec::new();
        file.take(budget).read_to_end(&mut bytes).map_err(err)?;
        budget = budget.saturating_sub(len - start);
        if start > 0 {
            // The first line is cut: drop it.
            truncated = true;
            let cut = bytes
                .iter()
                .position(|b| *b == b'\n')
                .map_or(bytes.len(), |i| i + 1);
            bytes.drain(..cut);
        }
        texts.push(bytes);
    }
    let (mut questions, mut skipped) = (Vec::new(), 0);
    for bytes in texts.iter().rev() {
        for line in String::from_utf8_lossy(bytes).lines() {
            if line.trim().is_empty() {
                continue;
            }
            let parsed = serde_json::from_str::<Question>(line)
                .ok()
                .and_then(|q| Some((humantime::parse_rfc3339_weak(&q.time).ok()?, q)));
            match parsed {
                Some((t, q)) if since.is_none_or(|s| t >= s) => questions.push(q),
                Some(_) => {}
                None => skipped += 1,
            }
        }
    }
    Ok((questions, skipped, truncated))
}

/// The whole command: read, compute, render.
pub fn run(
    paths: &[PathBuf],
    since: Option<&str>,
    format: Format,
    by: By,
) -> Result<String, ReportError> {
    run_with(paths, since, format, by, &Thresholds::default())
}

/// [`run`] with the suggestions' thresholds.
pub fn run_with(
    paths: &[PathBuf],
    since: Option<&str>,
    format: Format,
    by: By,
    thresholds: &Thresholds,
) -> Result<String, ReportError> {
    let since_t = since
        .map(|s| parse_since(s, SystemTime::now()))
        .transpose()?;
    let files = audit_files(paths);
    let (questions, skipped_lines) = read(&files, since_t)?;
    let report = build(&questions, by, since_t, files, skipped_lines, thresholds)?;
    render(&report, format)
}

/// A report of `questions`, with its suggestions.
pub fn build(
    questions: &[Question],
    by: By,
    since: Option<SystemTime>,
    files: Vec<PathBuf>,
    skipped_lines: u64,
    thresholds: &Thresholds,
) -> Result<Report, ReportError> {
    for (name, v) in [
        ("redundant-share", thresholds.redundant_share),
        ("unanswered-share", thresholds.unanswered_share),
        ("reask-share", thresholds.reask_share),
        ("repeat-share", thresholds.repeat_share),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(ReportError::Share(name, v));
        }
    }
    let (tools, total) = summarize_by(questions, by);
    Ok(Report {
        by,
        since: since.map(|t| humantime::format_rfc3339_seconds(t).to_string()),
        files,
        skipped_lines,
        rule: ATTENTION_RULE,
        tools,
        total,
        thresholds: *thresholds,
        answer_times: answer_times(questions),
        days: days(questions),
        truncated: false,
        suggestions: suggest(questions, thresholds),
    })
}

/// The report in `format`.
pub fn render(report: &Report, format: Format) -> Result<String, ReportError> {
    Ok(match format {
        Format::Table => table(report) + &suggestions_text(&report.suggestions),
        Format::Json => serde_json::to_string_pretty(report).map_err(ReportError::Json)? + "\n",
        Format::Csv => csv(report),
        Format::Html => super::report_html::page(report),
    })
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
