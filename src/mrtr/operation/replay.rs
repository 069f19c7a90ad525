//! Replay mode: an operation that holds nothing between round trips. Each
//! run calls the tool again and gives the server, in order, the answers
//! collected in earlier runs (sealed in `requestState`), as long as each
//! question's fingerprint matches the one its answer was given for; the
//! first question without an answer goes to the client, and the run ends:
//! the server hears `cancel`, the call `notifications/cancelled`, and the
//! session goes back at once.
//!
//! A replayed answer is not a new question: it is not audited, timed or
//! guarded again (its fingerprint proves it is the question that was).

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::Operation;
use crate::mrtr::convert::{self, Kind, Question};
use crate::mrtr::state::{Answered, Asking, Claims};
use crate::protocol::{Reason, Reject};

/// What a replay-mode run gives again and what it collects.
#[derive(Debug, Default)]
pub(super) struct Replay {
    /// Answers collected so far, in the order the server asked.
    answers: Vec<Answered>,
    /// How many of `answers` this run has given (the next to give).
    cursor: usize,
    /// The questions the last round put to the client (none on a first run).
    asked: Vec<Asking>,
    /// The retry's `inputResponses`, for `asked`, by key.
    responses: Map<String, Value>,
    /// The trace context of the operation's first root span, carried on.
    pub tc: Option<String>,
}

impl Replay {
    /// A retry's run, from its (opened and checked) state.
    pub(super) fn resumed(claims: Claims, responses: Map<String, Value>) -> Self {
        Self {
            answers: claims.ans,
            cursor: 0,
            asked: claims.ask,
            responses,
            tc: claims.tc,
        }
    }

    /// The answers a state sealed now carries.
    pub(super) fn answers(&self) -> &[Answered] {
        &self.answers
    }
}

/// What a pushed question is to a replay-mode run.
pub(super) enum Replayed {
    /// Answered in an earlier run: this answer, given again.
    Again(Value),
    /// Not answered yet: guarded, then answered from the retry or asked.
    New,
}

impl Operation {
    /// The collected answer for `q` if it is the next one and its
    /// fingerprint matches; a question that differs from the next answer's
    /// (and is not the one the last round asked) means the server took
    /// another path: the answers after this point no longer apply.
    pub(super) fn replayed(&mut self, q: &Question) -> Replayed {
        let Some(r) = self.replay.as_mut() else {
            return Replayed::New;
        };
        if let Some(next) = r.answers.get(r.cursor) {
            if next.f == q.fingerprint {
                r.cursor += 1;
                return Replayed::Again(next.a.clone());
            }
            if !r.asked.iter().any(|a| a.k == q.key && a.f == q.fingerprint) {
                tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), key = %q.key,
                    dropped = r.answers.len() - r.cursor,
                    "the server asked a different question than last time; asking the client, not replaying");
                r.answers.truncate(r.cursor);
            }
        }
        Replayed::New
    }

    /// For the question the last round asked under `q.key`: its re-asks and
    /// asking time carry over, and the retry's answer to it (when the
    /// question is still the same) is handed to the usual checks.
    pub(super) fn take_retry_answer(&mut self, q: &mut Question) -> Option<Value> {
        let r = self.replay.as_mut()?;
        let pos = r.asked.iter().position(|a| a.k == q.key)?;
        let asked = r.asked.remove(pos);
        if asked.f != q.fingerprint {
            tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), key = %q.key,
                "the server's question changed since it was asked; asking again");
            return None;
        }
        q.reasks = asked.rk;
        let now_ms = u64::try_from(self.engine.clock.unix_now().as_millis()).unwrap_or(u64::MAX);
        let waited = std::time::Duration::from_millis(now_ms.saturating_sub(asked.at));
        q.asked_at = Instant::now()
            .checked_sub(waited)
            .unwrap_or_else(Instant::now);
        r.responses.remove(&q.key)
    }

    /// Records an answer the server was given, so later runs give it again.
    pub(super) fn collect(&mut self, q: &Question, answer: &Value) {
        if let Some(r) = self.replay.as_mut() {
            let at = r.cursor.min(r.answers.len());
            r.answers.insert(
                at,
                Answered {
                    f: q.fingerprint.clone(),
                    a: answer.clone(),
                },
            );
            r.cursor = at + 1;
        }
    }

    /// The questions of this round, as the next state records them.
    pub(super) fn asking(&self) -> Vec<Asking> {
        let now = self.engine.clock.unix_now();
        self.pending
            .iter()
            .map(|q| {
                let waited = q.asked_at.elapsed();
                Asking {
                    k: q.key.clone(),
                    f: q.fingerprint.clone(),
                    kd: q.kind.label(q.url_mode).to_owned(),
                    rk: q.reasks,
                    at: u64::try_from(now.saturating_sub(waited).as_millis()).unwrap_or(0),
                }
            })
            .collect()
    }

    /// A round of a replay-mode operation is over once its questions reached
    /// the client: the server's questions hear `cancel` (an error for
    /// sampling and roots, as in hold mode), its call is read until the
    /// server ends it (`notifications/cancelled` only if it does not, see
    /// [`Call::end`](crate::upstream::session::Call::end)), and the session
    /// goes back to the pool as `self` drops, after that. Nothing is kept:
    /// no table entry, no actor, no session.
    pub(super) async fn suspend(mut self: Box<Self>) {
        let why = "redmark: replay mode; the question went to the client, the call runs again when it answers";
        for q in std::mem::take(&mut self.pending) {
            let _ = self
                .session
                .respond(q.upstream_id.clone(), convert::abandon(&q, why))
                .await;
        }
        self.engine
            .metrics
            .record_replay_round(&self.route.name, &self.target);
        self.root.record("redmark.outcome", "input_required");
        self.root.record("redmark.rounds", i64::from(self.round));
        tracing::info!(
            operation = %self.id, trace_id = self.trace_id.as_deref(),
            route = %self.route.name, tool = %self.target, round = self.round,
            elapsed_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "replay round asked; the upstream call is given up and nothing is held"
        );
        // The lease (in what is left of `self`) goes back only once the
        // call is over, so the next call on the session never races the
        // server's ending of this one.
        let (id, trace_id) = (self.id.clone(), self.trace_id.clone());
        let ended = self.call.end(why, self.route.pool.end_grace()).await;
        if !ended {
            tracing::info!(operation = %id, trace_id = trace_id.as_deref(),
                "the server did not end the given-up call; its session is not reused for another call until it is multiplexed");
        }
    }
}

/// Checks the shape of a retry's answers to the questions its replay-mode
/// state says were asked, before the round is used: a malformed answer is
/// refused and the state stays good for a corrected retry.
pub fn check_shapes(claims: &Claims, responses: &Map<String, Value>) -> Result<(), Reject> {
    for asked in &claims.ask {
        let Some(given) = responses.get(&asked.k) else {
            continue;
        };
        let (kind, url_mode) = Kind::from_label(&asked.kd).unwrap_or((Kind::Elicitation, false));
        let q = Question::recorded(&asked.k, kind, url_mode);
        if let Err(e) = convert::answer(&q, given) {
            return Err(Reject::new(Reason::MalformedInputResponse, e.to_string())
                .with("key", json!(e.key)));
        }
    }
    Ok(())
}
