//! Where every question ends up accounted, once: its audit line and its
//! `redmark_questions` count (and, when a person answered, its answer time).
//!
//! Every path that ends a question calls [`Engine::account`]: converted
//! pushes ([`super::operation`]), a native server's own questions
//! ([`super::native`]), the questions of 2025-era clients (served by the
//! same two), questions refused by policy or turned into a tool error
//! (model-owned), and those declined on the user's behalf
//! (`on_missing_capability = "decline"`). A re-asked attempt (red mark) is
//! one accounted question of its own. Nothing else writes audit lines, so
//! `redmark report`'s totals and the metric agree by construction.
//!
//! A caller outside an operation (a gateway-made task, say) builds an
//! [`Asker`] (whose question), a [`Question`] (what was asked) and an
//! [`Answered`] (how it ended) and calls [`Engine::account`] once per
//! question's ending.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::Engine;
use super::convert::{Kind, Question};
use crate::telemetry::audit::{self, AuditRecord, Origin, Outcome};

/// Whose question an audit line is about: the operation's side of it.
pub struct Asker<'a> {
    pub route: &'a str,
    pub tool: &'a str,
    pub principal: &'a str,
    pub operation: &'a str,
    pub arguments: &'a Value,
    pub trace_id: Option<&'a str>,
}

/// How a question ended, for its audit line.
pub struct Answered<'a> {
    pub outcome: Outcome,
    /// `ok`, or the `data.reason` that ended it.
    pub verdict: &'a str,
    /// From putting the question to the client to the answer (or the re-asked
    /// attempt) arriving; `None` when no person answered.
    pub answer_ms: Option<u64>,
    /// The answer the server gets (never written: field names only).
    pub answer: Option<&'a Value>,
    /// The rule a re-asked attempt broke.
    pub reask_rule: Option<&'a str>,
}

impl Engine {
    /// Accounts for one question's ending: the `redmark_questions` counter,
    /// the answer time when a person answered, and one audit line.
    pub fn account(
        &self,
        asker: &Asker<'_>,
        q: &Question,
        ended: &Answered<'_>,
        origin: Option<Origin>,
    ) {
        self.metrics
            .record_question(asker.route, asker.tool, outcome_label(ended.outcome));
        if let (Some(ms), Some(_)) = (ended.answer_ms, ended.answer) {
            #[allow(clippy::cast_precision_loss)]
            self.metrics
                .record_answer(asker.route, asker.tool, ms as f64 / 1000.0);
        }
        let content = accepted_content(ended.answer);
        let repeated = content
            .map(|c| self.last_answers.repeated(asker.principal, asker.tool, c))
            .unwrap_or_default();
        if self.audit.is_enabled() {
            let mut record = question_record(asker, q, ended, origin);
            record.repeated_fields = repeated;
            self.audit.record(record);
        }
    }
}

fn accepted_content(answer: Option<&Value>) -> Option<&Map<String, Value>> {
    answer
        .filter(|a| a.get("action").and_then(Value::as_str) == Some("accept"))
        .and_then(|a| a.get("content"))
        .and_then(Value::as_object)
}

/// Digests of each person's last accepted value per tool and field, so an
/// audit line can say a field repeated that person's previous answer
/// (`repeated_fields`) without any value leaving memory. Salted per process,
/// keyed by a digest of (principal, tool, field); bounded: when full it
/// starts over (an answer then counts as new, never as repeated).
pub struct LastAnswers {
    salt: [u8; 32],
    digests: dashmap::DashMap<[u8; 32], [u8; 32]>,
    max: usize,
}

/// Entries [`LastAnswers`] keeps (64 bytes each, plus the map's overhead).
pub const LAST_ANSWERS_MAX: usize = 65_536;

impl LastAnswers {
    pub fn new(max: usize) -> Self {
        LastAnswers {
            salt: rand::random(),
            digests: dashmap::DashMap::new(),
            max,
        }
    }

    fn digest(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.salt);
        for p in parts {
            h.update((p.len() as u64).to_be_bytes());
            h.update(p);
        }
        h.finalize().into()
    }

    /// The fields of `content` equal to this principal's previous accepted
    /// value for the tool and field; remembers `content` as the latest.
    pub fn repeated(
        &self,
        principal: &str,
        tool: &str,
        content: &Map<String, Value>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for (field, value) in content {
            let key = self.digest(&[principal.as_bytes(), tool.as_bytes(), field.as_bytes()]);
            let value = self.digest(&[value.to_string().as_bytes()]);
            if self.digests.len() >= self.max && !self.digests.contains_key(&key) {
                self.digests.clear();
            }
            if self.digests.insert(key, value) == Some(value) {
                out.push(field.clone());
            }
        }
        out
    }
}

/// The `outcome` label and audit word of an [`Outcome`].
pub fn outcome_label(o: Outcome) -> &'static str {
    match o {
        Outcome::Accepted => "accepted",
        Outcome::Declined => "declined",
        Outcome::Cancelled => "cancelled",
        Outcome::Unanswered => "unanswered",
        Outcome::Refused => "refused",
        Outcome::Invalid => "invalid",
        Outcome::Denied => "denied",
        Outcome::Abandoned => "abandoned",
    }
}

/// One audit line for question `q` (field names and outcome, never values):
/// the same for converted questions and a native server's own.
pub fn question_record(
    asker: &Asker<'_>,
    q: &Question,
    ended: &Answered<'_>,
    origin: Option<Origin>,
) -> AuditRecord {
    let fields = q.field_names();
    let content = accepted_content(ended.answer);
    AuditRecord {
        time: audit::timestamp(std::time::SystemTime::now()),
        route: asker.route.to_owned(),
        tool: asker.tool.to_owned(),
        principal: asker.principal.to_owned(),
        operation: asker.operation.to_owned(),
        key: q.key.clone(),
        method: match q.kind {
            Kind::Elicitation => audit::Method::Elicitation,
            Kind::Sampling => audit::Method::Sampling,
            Kind::Roots => audit::Method::Roots,
        },
        mode: (q.kind == Kind::Elicitation).then_some(if q.url_mode {
            audit::Mode::Url
        } else {
            audit::Mode::Form
        }),
        fields,
        outcome: ended.outcome,
        answer_ms: ended.answer_ms,
        verdict: ended.verdict.to_owned(),
        redundant: content.is_some_and(|c| audit::redundant(asker.arguments, c)),
        redundant_fields: content
            .map(|c| audit::redundant_fields(asker.arguments, c))
            .unwrap_or_default(),
        repeated_fields: Vec::new(),
        default_offered: q.offered.iter().map(|(f, _)| f.clone()).collect(),
        narrowed: q.narrowed.clone(),
        default_kept: q
            .offered
            .iter()
            .filter(|(f, v)| content.and_then(|c| c.get(f)) == Some(v))
            .map(|(f, _)| f.clone())
            .collect(),
        trace_id: asker.trace_id.map(str::to_owned),
        reask: ended.reask_rule.is_some(),
        rule: ended.reask_rule.map(str::to_owned),
        origin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn content(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_repeat_is_per_principal_tool_and_field() {
        let last = LastAnswers::new(16);
        let eur = content(json!({"currency": "EUR"}));
        assert!(last.repeated("alice", "invoice", &eur).is_empty());
        assert_eq!(last.repeated("alice", "invoice", &eur), ["currency"]);
        // Another person, another tool: their own first answer.
        assert!(last.repeated("bob", "invoice", &eur).is_empty());
        assert!(last.repeated("alice", "quote", &eur).is_empty());
        // A changed answer is new, and becomes the one to repeat.
        let gbp = content(json!({"currency": "GBP"}));
        assert!(last.repeated("alice", "invoice", &gbp).is_empty());
        assert_eq!(last.repeated("alice", "invoice", &gbp), ["currency"]);
    }

    #[test]
    fn it_is_bounded() {
        let last = LastAnswers::new(2);
        let v = content(json!({"f": 1}));
        for p in ["a", "b", "c", "d"] {
            last.repeated(p, "t", &v);
            assert!(last.digests.len() <= 2);
        }
    }
}
