//! What `redmark report` suggests changing, from the audit log: each
//! suggestion names the tool (and field), the evidence, the policy lines to
//! add, and the people's attention it would have saved over the window.
//!
//! The rules follow the seed's arithmetic: ask only when the person owns a
//! value nobody else can supply and the answer completes the operation.
//! - [`Kind::ModelOwned`]: a field whose accepted answers were already in the
//!   call's arguments in at least `redundant_share` of them.
//! - [`Kind::PreciseError`] / [`Kind::HostConfirmation`]: a question left
//!   unanswered or cancelled in at least `unanswered_share` of the times it
//!   reached a person (an approval: the tool's `destructiveHint` instead).
//! - [`Kind::FewerPrompts`]: a tool whose operations ask `prompts` or more
//!   questions, in at least half of them.
//! - [`Kind::ShowTheBound`]: re-asks (red marks) of a tool, at least
//!   `reask_share` of them for one rule.
//! - [`Kind::Remember`]: a field answered with the person's previous answer
//!   in at least `repeat_share` of its accepted answers.
//!
//! Every rule needs `min_sample` observations. A field whose answers were the
//! person's own (not in the arguments often enough) gets no `model_owned`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::audit::Outcome;
use super::policy_lines::{Setting, lines};
use super::report::{Question, median};

/// The thresholds of the rules (`redmark report --min-sample ...`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, clap::Args)]
pub struct Thresholds {
    /// Fewest observations a suggestion rests on.
    #[arg(long, default_value_t = 20)]
    pub min_sample: u64,
    /// Share of a field's accepted answers already in the arguments (0-1).
    #[arg(long, default_value_t = 0.5)]
    pub redundant_share: f64,
    /// Share of a question's showings left unanswered or cancelled (0-1).
    #[arg(long, default_value_t = 0.25)]
    pub unanswered_share: f64,
    /// Questions per operation from which a tool asks too many.
    #[arg(long, default_value_t = 3)]
    pub prompts: u64,
    /// Share of a tool's re-asks caused by one rule (0-1).
    #[arg(long, default_value_t = 0.5)]
    pub reask_share: f64,
    /// Share of a field's accepted answers equal to the person's previous one (0-1).
    #[arg(long, default_value_t = 0.5)]
    pub repeat_share: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_sample: 20,
            redundant_share: 0.5,
            unanswered_share: 0.25,
            prompts: 3,
            reask_share: 0.5,
            repeat_share: 0.5,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    ModelOwned,
    PreciseError,
    HostConfirmation,
    FewerPrompts,
    ShowTheBound,
    Remember,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggestion {
    pub kind: Kind,
    pub route: String,
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What to change, in a sentence.
    pub change: String,
    /// The numbers it rests on.
    pub evidence: String,
    /// Lines to add to the route's policy file ([`super::policy_lines`]):
    /// empty when the change is the server's, or when no line would read
    /// back as exactly this tool and field.
    pub policy: Vec<String>,
    /// People's attention the change would have saved over the window.
    pub hours_saved: f64,
}

/// What a question cost in ms: its answer time, or its tool's median when it
/// reached a person and got no answer; nothing when refused.
fn charge(q: &Question, tool_median: f64) -> f64 {
    match q.answer_ms {
        #[allow(clippy::cast_precision_loss)]
        Some(ms) => ms as f64,
        None if q.outcome == Outcome::Refused => 0.0,
        None => tool_median,
    }
}

fn hours(ms: f64) -> f64 {
    ms / 3_600_000.0
}

fn share(n: u64, of: u64) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    if of == 0 { 0.0 } else { n as f64 / of as f64 }
}

fn pct(n: u64, of: u64) -> String {
    format!("{:.0} %", 100.0 * share(n, of))
}

/// Field names that ask for approval rather than a value.
fn is_approval(q: &Question) -> bool {
    const WORDS: [&str; 7] = [
        "confirm", "approve", "approval", "proceed", "ok", "yes", "continue",
    ];
    q.fields.is_empty()
        || q.fields.iter().all(|f| {
            let f = f.to_ascii_lowercase();
            WORDS.iter().any(|w| f.contains(w))
        })
}

/// The suggestions for these questions, most attention saved first.
pub fn suggest(questions: &[Question], t: &Thresholds) -> Vec<Suggestion> {
    let mut tools: BTreeMap<(&str, &str), Vec<&Question>> = BTreeMap::new();
    for q in questions {
        tools.entry((&q.route, &q.tool)).or_default().push(q);
    }
    let mut out = Vec::new();
    for ((route, tool), qs) in &tools {
        let mut times: Vec<u64> = qs.iter().filter_map(|q| q.answer_ms).collect();
        times.sort_unstable();
        let med = median(&times).unwrap_or(0.0);
        let ctx = Tool {
            route,
            tool,
            qs,
            med,
            t,
        };
        ctx.fields(&mut out);
        ctx.unanswered(&mut out);
        ctx.prompts(&mut out);
        ctx.reasks(&mut out);
    }
    out.sort_by(|a, b| {
        b.hours_saved
            .total_cmp(&a.hours_saved)
            .then(a.kind.cmp(&b.kind))
            .then(a.tool.cmp(&b.tool))
    });
    out
}

struct Tool<'a> {
    route: &'a str,
    tool: &'a str,
    qs: &'a [&'a Question],
    med: f64,
    t: &'a Thresholds,
}

impl Tool<'_> {
    fn suggestion(
        &self,
        kind: Kind,
        field: Option<&str>,
        change: String,
        evidence: String,
        policy: Vec<String>,
        ms: f64,
    ) -> Suggestion {
        Suggestion {
            kind,
            route: self.route.to_owned(),
            tool: self.tool.to_owned(),
            field: field.map(str::to_owned),
            change,
            evidence,
            policy,
            hours_saved: hours(ms),
        }
    }

    /// `model_owned` and `remember`, field by field over accepted answers.
    fn fields(&self, out: &mut Vec<Suggestion>) {
        let accepted: Vec<&&Question> = self
            .qs
            .iter()
            .filter(|q| q.outcome == Outcome::Accepted && !q.reask)
            .collect();
        let names: BTreeSet<&str> = accepted
            .iter()
            .flat_map(|q| q.fields.iter().map(String::as_str))
            .collect();
        for field in names {
            let with: Vec<&&&Question> = accepted
                .iter()
                .filter(|q| q.fields.iter().any(|f| f == field))
                .collect();
            let n = with.len() as u64;
            if n < self.t.min_sample {
                continue;
            }
            let redundant: Vec<_> = with
                .iter()
                // `redundant` (every field known) also reads audit lines
                // written before fields were named one by one.
                .filter(|q| q.redundant || q.redundant_fields.iter().any(|f| f == field))
                .collect();
            let r = redundant.len() as u64;
            if share(r, n) >= self.t.redundant_share {
                let ms = redundant.iter().map(|q| charge(q, self.med)).sum();
                out.push(self.suggestion(
                    Kind::ModelOwned,
                    Some(field),
                    format!("`{field}` is the model's to supply: give it a precise tool error instead of asking a person"),
                    format!("{r} of {n} accepted answers ({}) were already in the call's arguments", pct(r, n)),
                    lines(self.tool, None, Setting::ModelOwned(field)),
                    ms,
                ));
                // The model's value, not the person's: nothing to remember.
                continue;
            }
            let repeated: Vec<_> = with
                .iter()
                .filter(|q| q.repeated_fields.iter().any(|f| f == field))
                .collect();
            let k = repeated.len() as u64;
            if share(k, n) >= self.t.repeat_share {
                let ms = repeated.iter().map(|q| charge(q, self.med)).sum();
                out.push(self.suggestion(
                    Kind::Remember,
                    Some(field),
                    format!("remember each person's `{field}` and offer it as the default: they confirm instead of typing"),
                    format!("{k} of {n} accepted answers ({}) repeated that person's previous answer", pct(k, n)),
                    lines(self.tool, Some(field), Setting::Remember("30d")),
                    ms,
                ));
            }
        }
    }

    /// Questions (by key) that reached people and were often not answered.
    fn unanswered(&self, out: &mut Vec<Suggestion>) {
        let mut keys: BTreeMap<&str, Vec<&&Question>> = BTreeMap::new();
        for q in self
            .qs
            .iter()
            .filter(|q| q.outcome != Outcome::Refused && !q.reask)
        {
            keys.entry(q.key.as_str()).or_default().push(q);
        }
        for (key, shown) in keys {
            let n = shown.len() as u64;
            let lost = shown
                .iter()
                .filter(|q| {
                    matches!(
                        q.outcome,
                        Outcome::Unanswered | Outcome::Cancelled | Outcome::Abandoned
                    )
                })
                .count() as u64;
            if n < self.t.min_sample || share(lost, n) < self.t.unanswered_share {
                continue;
            }
            let ms = shown.iter().map(|q| charge(q, self.med)).sum();
            let evidence = format!(
                "{lost} of {n} times it was shown ({}) it was left unanswered or cancelled, each ending its run",
                pct(lost, n)
            );
            let approval = shown.iter().filter(|q| is_approval(q)).count() * 2 > shown.len();
            let s = if approval {
                self.suggestion(
                    Kind::HostConfirmation,
                    None,
                    format!("question `{key}` asks for approval, not a value: declare the tool `destructiveHint: true` and let the host confirm, then stop asking"),
                    evidence,
                    lines(self.tool, None, Setting::MaxQuestions(0)),
                    ms,
                )
            } else {
                self.suggestion(
                    Kind::PreciseError,
                    None,
                    format!("question `{key}` is often left unanswered: return a precise error naming what is missing (the model can ask in chat) instead of a dialog"),
                    evidence,
                    lines(self.tool, None, Setting::MaxQuestions(0)),
                    ms,
                )
            };
            out.push(s);
        }
    }

    /// Operations that ask `prompts` questions or more.
    fn prompts(&self, out: &mut Vec<Suggestion>) {
        let mut ops: BTreeMap<&str, Vec<&&Question>> = BTreeMap::new();
        for q in self
            .qs
            .iter()
            .filter(|q| q.outcome != Outcome::Refused && !q.operation.is_empty())
        {
            ops.entry(q.operation.as_str()).or_default().push(q);
        }
        let n = ops.len() as u64;
        let many: Vec<&Vec<&&Question>> = ops
            .values()
            .filter(|qs| qs.len() as u64 >= self.t.prompts)
            .collect();
        let m = many.len() as u64;
        if n < self.t.min_sample || m * 2 < n {
            return;
        }
        let keep = usize::try_from(self.t.prompts.saturating_sub(1)).unwrap_or(usize::MAX);
        // What the prompts past the last one kept would have cost.
        let ms = many
            .iter()
            .flat_map(|qs| qs.iter().skip(keep))
            .map(|q| charge(q, self.med))
            .sum();
        let total: usize = ops.values().map(Vec::len).sum();
        #[allow(clippy::cast_precision_loss)]
        let mean = total as f64 / n as f64;
        out.push(self.suggestion(
            Kind::FewerPrompts,
            None,
            "ask fewer prompts per operation: move values the model owns to arguments, approvals to the host, and ask the rest once, after the plan".into(),
            format!("{m} of {n} operations ({}) asked {} or more questions; {mean:.1} per operation", pct(m, n), self.t.prompts),
            lines(self.tool, None, Setting::MaxQuestions(self.t.prompts.saturating_sub(1))),
            ms,
        ));
    }

    /// Re-asks dominated by one rule: people cannot see the bound.
    fn reasks(&self, out: &mut Vec<Suggestion>) {
        let reasks: Vec<&&Question> = self.qs.iter().filter(|q| q.reask).collect();
        let n = reasks.len() as u64;
        if n < self.t.min_sample {
            return;
        }
        let mut by_rule: BTreeMap<&str, Vec<&&&Question>> = BTreeMap::new();
        for q in &reasks {
            by_rule
                .entry(q.rule.as_deref().unwrap_or("?"))
                .or_default()
                .push(q);
        }
        // The most frequent rule; on a tie, the first by name (a stable report).
        let Some((rule, hit)) = by_rule
            .into_iter()
            .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))
        else {
            return;
        };
        let k = hit.len() as u64;
        if share(k, n) < self.t.reask_share {
            return;
        }
        let ms = hit.iter().map(|q| charge(q, self.med)).sum();
        out.push(self.suggestion(
            Kind::ShowTheBound,
            None,
            format!("people do not see the `{rule}` bound: state it in the question's message or the field's description (a server change; no policy line)"),
            format!("{k} of {n} red-mark re-asks ({}) broke `{rule}`", pct(k, n)),
            Vec::new(),
            ms,
        ));
    }
}

#[cfg(test)]
#[path = "suggest_tests.rs"]
mod tests;
