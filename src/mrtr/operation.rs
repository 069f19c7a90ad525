//! One logical operation (`tools/call`, `prompts/get`, `resources/read`) in
//! hold mode: an actor that owns the leased session and the upstream call
//! for the whole operation, relays what the server sends to whichever client
//! request is attached, turns the server's pushed questions into
//! `InputRequiredResult` rounds, and applies each retry's answers to exactly
//! the pushed requests they answer. In replay mode (the `replay` module) the
//! same actor lives for one run of the call only: it ends each round instead
//! of waiting, and a retry starts a new run. `setup` makes the actor (lease,
//! call, spans); this module runs it; `finish` ends it; `client` is the
//! request attached to it at any moment.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::Engine;
use super::convert::{KeyNamer, Question};
use super::ending::Ending;
use super::outgoing::{InputRequired, Outgoing};
use super::state::{CLAIMS_VERSION, Claims, HOLD, REPLAY, principal_digest, request_digest_of};
use super::table::{Entry, ResumeReceiver, ResumeSender};
use crate::jsonrpc::{ErrorObject, Id, Payload};
use crate::policy::Policy;
use crate::protocol::{Method, Principal};
use crate::route::Route;
use crate::telemetry::traces;
use crate::upstream::UpstreamError;
use crate::upstream::pool::Lease;
use crate::upstream::session::{Call, CallEvent, CallStep, Session};

mod client;
mod finish;
mod notifications;
pub(crate) mod questions;
mod remembered;
mod replay;
mod setup;
pub(crate) mod spans;

use client::{Client, Notified};
pub use notifications::relayable;
use questions::Resumed;
use replay::Replay;
pub use replay::check_shapes;
pub use setup::{ReplayRun, begin, replay};
use spans::round_trip_span;

/// A fresh operation's id: 128 random bits as 32 hex digits.
pub(crate) fn operation_id() -> String {
    // One draw of 128 bits: an array is drawn a byte at a time (16 calls).
    crate::hex_text::lower(&rand::random::<u128>().to_le_bytes())
}

/// How long after its operation ends a state still gets a precise answer
/// (how the operation ended) instead of `state_expired`.
pub const LATE_RETRY_GRACE: Duration = Duration::from_secs(60);

/// Depth of an operation's queue of retries.
const RESUME_DEPTH: usize = 8;

/// The next retry on the operation's queue; none ever while it has no queue.
async fn next_resume(
    resumes: &mut Option<(ResumeSender, ResumeReceiver)>,
) -> Option<Box<super::table::Resume>> {
    match resumes {
        Some((_, rx)) => rx.next().await,
        None => std::future::pending().await,
    }
}

/// What driving the call produced.
enum Drive {
    /// Questions are waiting for the client.
    Ask,
    End(Ending),
}

/// How a round of [`Operation::ask_round`] ended.
enum Round {
    /// The questions went to the client; the operation waits for its retry.
    Asked,
    /// Replay mode: the questions went to the client and this run is over
    /// (suspended); a retry runs the call again.
    Suspended,
    /// The operation ends, answering this client if it is still there.
    End(Ending, Option<Box<Client>>),
}

/// What waiting for the client produced.
enum Wait {
    Resumed(Box<Client>),
    End(Ending),
    /// The retry's answers ended the operation; that retry hears how.
    EndWith(Ending, Box<Client>),
}

pub struct Operation {
    engine: Arc<Engine>,
    route: Arc<Route>,
    id: String,
    method: Method,
    target: String,
    /// What a state names the principal and the request by, worked out
    /// when the first question is asked: a call that asks none never needs them.
    digests: std::sync::OnceLock<Digests>,
    /// Held for the whole operation: one call per leased session is what ties
    /// every pushed request to this operation. `None` only for the moment a
    /// call goes out again on another session ([`Operation::call_again`]).
    _lease: Option<Lease>,
    session: Arc<Session>,
    call: Call,
    namer: KeyNamer,
    /// Asked and not yet answered.
    pending: Vec<Question>,
    /// Answers given in advance on the first request, by key.
    advance: Map<String, Value>,
    /// Pushes that arrived between rounds, handled when the next request attaches.
    deferred: Vec<(Id, String, Option<Value>)>,
    /// Questions asked so far (for `max_questions`).
    asked: usize,
    /// The policy in force when the operation started; a reload does not touch it.
    policy: Arc<Policy>,
    principal: Principal,
    arguments: crate::protocol::Arguments,
    /// Rounds issued so far; the state of the latest one may be presented.
    round: u32,
    awaiting: Option<u32>,
    consumed: u32,
    registered: bool,
    declined: bool,
    cancelled: bool,
    /// The queue retries reach the operation by, made when it registers
    /// (the first time it asks): a call answered at once never needs one.
    /// The operation keeps a sender, so the queue never ends while it lives.
    resumes: Option<(ResumeSender, ResumeReceiver)>,
    /// The operation's root span: from the first request to the ending.
    root: tracing::Span,
    /// The upstream call's span (a child of the root), held for the whole call.
    upstream_span: tracing::Span,
    /// The root's trace id (empty when not traced), on every log line.
    /// `None` when the operation is not traced (no exporter, or not sampled).
    trace_id: Option<String>,
    /// The progress token the upstream call carries (the first request's);
    /// progress is relayed under the attached request's own token.
    upstream_progress: Option<Value>,
    started: Instant,
    /// Notifications dropped because the client was not reading its stream.
    dropped: u64,
    /// Replay mode: what this run gives again and collects; `None` in hold mode.
    replay: Option<Replay>,
    /// The call already went out again on another session ([`Operation::call_again`]).
    sent_again: bool,
}

/// The digests a state carries (`pr`, `rq`).
struct Digests {
    principal: String,
    request: String,
}

impl Operation {
    fn digests(&self) -> &Digests {
        self.digests.get_or_init(|| Digests {
            principal: principal_digest(&self.route.name, &self.principal.name),
            request: request_digest_of(
                &self.route.name,
                self.method.as_str(),
                &Value::String(self.target.clone()),
                self.arguments.value(),
            ),
        })
    }

    /// Arguments boxed: see [`Start`] (an argument is kept apart for the whole run).
    async fn run(mut self: Box<Self>, first: Box<Client>) {
        let mut client = Some(first);
        let ending = loop {
            let Some(current) = client.take() else {
                break Ending::ClientDisconnected;
            };
            // Each round is boxed and gone before the wait: a future keeps room
            // for everything any of its awaits holds, and this one stays
            // allocated for as long as a question waits (10,000 of them, say).
            match Box::pin(self.ask_round(current)).await {
                Round::Asked => {}
                Round::Suspended => {
                    Box::pin(self.suspend()).await;
                    return;
                }
                Round::End(ending, current) => {
                    client = current;
                    break ending;
                }
            }
            match self.wait().await {
                Wait::Resumed(next) => client = Some(next),
                Wait::End(ending) => break ending,
                Wait::EndWith(ending, next) => {
                    client = Some(next);
                    break ending;
                }
            }
        };
        // Boxed, as the other rare steps: see above.
        Box::pin(self.finish(ending, client)).await;
    }

    /// One round for the attached request: relays the call until it ends or
    /// questions are ready, then asks them (hold mode: the operation then
    /// waits; replay mode: it ends this run).
    async fn ask_round(&mut self, current: Box<Client>) -> Round {
        match Box::pin(self.drive(&current)).await {
            Drive::End(ending) => return Round::End(ending, Some(current)),
            Drive::Ask => {}
        }
        if self.round >= self.engine.max_rounds {
            return Round::End(
                Ending::RoundsExhausted(self.engine.max_rounds),
                Some(current),
            );
        }
        if self.replay.is_some() {
            self.round += 1;
            return match self.input_required() {
                Ok(result) => {
                    let keys: Vec<&str> = self.pending.iter().map(|q| q.key.as_str()).collect();
                    tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), route = %self.route.name, tool = %self.target, round = self.round, keys = ?crate::telemetry::logging::json(&keys), mode = "replay", "asking the client");
                    // Sent or not, nothing waits for the answer here: a
                    // retry runs the call again wherever it lands.
                    let _ = current
                        .send(Outgoing::input_required(&current.id, result))
                        .await;
                    Round::Suspended
                }
                Err(ending) => Round::End(ending, Some(current)),
            };
        }
        if !self.registered {
            let (tx, _) = self
                .resumes
                .get_or_insert_with(|| futures::channel::mpsc::channel(RESUME_DEPTH));
            let entry = Entry {
                resume: tx.clone(),
                principal: self.digests().principal.clone(),
            };
            if let Err(e) = self.engine.table.insert(&self.id, entry) {
                return Round::End(Ending::TooManyPending(e.0), Some(current));
            }
            self.registered = true;
        }
        self.round += 1;
        self.awaiting = Some(self.round);
        let keys: Vec<&str> = self.pending.iter().map(|q| q.key.as_str()).collect();
        tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), route = %self.route.name, tool = %self.target, round = self.round, keys = ?crate::telemetry::logging::json(&keys), "asking the client");
        let result = match self.input_required() {
            Ok(result) => result,
            Err(ending) => return Round::End(ending, Some(current)),
        };
        if !current
            .send(Outgoing::input_required(&current.id, result))
            .await
        {
            // Nobody received the questions: nobody will answer them.
            return Round::End(Ending::ClientDisconnected, None);
        }
        // This round trip is over (`current` dropped); the wait for the next one is not part of it.
        Round::Asked
    }

    /// Relays the call until it ends or questions are ready for the client.
    async fn drive(&mut self, client: &Client) -> Drive {
        // Questions left unanswered by the last retry are asked again (spec
        // mrtr.mdx "Error Handling"), together with any that arrive meanwhile.
        for (id, method, params) in std::mem::take(&mut self.deferred) {
            if let Some(ending) = Box::pin(self.on_push(&client.ctx, id, &method, params)).await {
                return Drive::End(ending);
            }
        }
        // The gather window: bounded by `gather`, and ended as soon as the
        // server has pushed nothing for `gather_quiet` (pushes sent together
        // arrive together), so a lone question is not held for the bound.
        let mut gather_until =
            (!self.pending.is_empty()).then(|| tokio::time::Instant::now() + self.engine.gather);
        let mut quiet_until =
            gather_until.map(|_| tokio::time::Instant::now() + self.engine.gather_quiet);
        loop {
            let idle_until = tokio::time::Instant::now() + self.route.pool.call_timeout();
            let deadline = match (gather_until, quiet_until) {
                (Some(g), Some(q)) => g.min(q),
                (Some(g), None) => g,
                (None, _) => idle_until,
            };
            tokio::select! {
                biased;
                () = client.tx.closed() => return Drive::End(Ending::ClientDisconnected),
                Some(resume) = next_resume(&mut self.resumes) => Box::pin(self.refuse_stale(*resume)).await,
                step = self.call.next() => match step {
                    CallStep::Event(CallEvent::Notification { method, params }) => {
                        if let Some(n) = relayable(&client.ctx, self.upstream_progress.as_ref(), &method, params) {
                            match client.notify(n) {
                                Notified::Queued => {}
                                // spec 2026-07-28 basic/patterns/progress.mdx "Implementation Notes":
                                // "Both parties SHOULD implement rate limiting to prevent flooding".
                                Notified::Dropped => self.dropped_one(),
                                // spec cancellation.mdx: "The server MUST treat a client disconnect
                                // as cancellation of that request" (the ending cancels upstream).
                                Notified::Closed => return Drive::End(Ending::ClientDisconnected),
                            }
                        }
                    }
                    CallStep::Event(CallEvent::ServerRequest { id, method, params }) => {
                        if let Some(ending) = Box::pin(self.on_push(&client.ctx, id, &method, params)).await {
                            return Drive::End(ending);
                        }
                        if !self.pending.is_empty() {
                            let now = tokio::time::Instant::now();
                            gather_until.get_or_insert(now + self.engine.gather);
                            quiet_until = Some(now + self.engine.gather_quiet);
                        }
                    }
                    CallStep::Done(outcome) => return Drive::End(self.completed(outcome)),
                    CallStep::Lost(e) => return Drive::End(Ending::lost(e)),
                    CallStep::NotSent(e) => {
                        if let Err(e) = Box::pin(self.call_again(e)).await {
                            return Drive::End(Ending::lost(e));
                        }
                    }
                },
                () = tokio::time::sleep_until(deadline) => {
                    if gather_until.is_some() {
                        return Drive::Ask;
                    }
                    return Drive::End(Ending::UpstreamTimeout(self.route.pool.call_timeout()));
                }
            }
        }
    }

    /// Sends the call again, once, on another session, when the server had
    /// ended the first one before the call reached it (HTTP 404, spec
    /// 2025-06-18 transports.mdx "Session Management": the client "MUST
    /// start a new session"). Never a call the server may have processed:
    /// in hold mode that would run it twice behind the client's back.
    async fn call_again(&mut self, gone: UpstreamError) -> Result<(), UpstreamError> {
        let Some(unsent) = self.call.unsent().filter(|_| !self.sent_again) else {
            return Err(gone);
        };
        self.sent_again = true;
        tracing::info!(operation = %self.id, trace_id = self.trace_id.as_deref(), route = %self.route.name,
            "the server had ended the session before the call reached it; sending it on another");
        // The old lease goes back first: its session is gone (the 404
        // retired it at once, so no lease takes it again), and it must not
        // count against the principal's sessions while the next one is leased.
        self._lease = None;
        let lease = self
            .route
            .lease(&self.principal, self.session.profile)
            .await?;
        let session = lease.session().clone();
        self.call = session.call(&unsent.method, unsent.params).await?;
        self.session = session;
        self._lease = Some(lease);
        Ok(())
    }

    /// Counts a notification the client's full queue could not take; logs
    /// the first one only (the count is on the operation's end line).
    fn dropped_one(&mut self) {
        if self.dropped == 0 {
            tracing::warn!(operation = %self.id, trace_id = self.trace_id.as_deref(), route = %self.route.name, tool = %self.target,
                "the client is not reading its response stream; dropping notifications");
        }
        self.dropped += 1;
    }

    fn completed(&self, outcome: Result<Payload, ErrorObject>) -> Ending {
        match outcome {
            Ok(result) => Ending::Completed {
                result,
                declined: self.declined,
                cancelled: self.cancelled,
            },
            Err(e) => Ending::UpstreamError(e),
        }
    }

    /// The `InputRequiredResult` of this round, or the ending of an
    /// operation whose state would not fit in `[state] max_bytes`.
    fn input_required(&self) -> Result<InputRequired, Ending> {
        let requests = self
            .pending
            .iter()
            .map(|q| (q.key.clone(), q.request_text().to_owned()))
            .collect();
        let now = self.engine.clock.unix_now();
        let claims = match &self.replay {
            None => Claims {
                v: CLAIMS_VERSION,
                op: self.id.clone(),
                node: self.engine.node.clone(),
                addr: self.engine.advertise.clone(),
                pr: self.digests().principal.clone(),
                // The state outlives the operation by a grace period, so a retry that
                // comes just too late hears `operation_expired`, not a bare `state_expired`.
                exp: (now + self.engine.ttl + LATE_RETRY_GRACE).as_secs(),
                rq: self.digests().request.clone(),
                rd: self.round,
                m: HOLD.into(),
                // A retry served elsewhere joins the same trace.
                tc: traces::traceparent(&self.root),
                ans: Vec::new(),
                ask: Vec::new(),
                nat: None,
            },
            // Nothing waits for a replay-mode answer, so no grace: past the TTL
            // the state is simply expired.
            Some(replay) => Claims {
                v: CLAIMS_VERSION,
                op: self.id.clone(),
                node: self.engine.node.clone(),
                addr: self.engine.advertise.clone(),
                pr: self.digests().principal.clone(),
                exp: (now + self.engine.ttl).as_secs(),
                rq: self.digests().request.clone(),
                rd: self.round,
                m: REPLAY.into(),
                tc: replay
                    .tc
                    .clone()
                    .or_else(|| traces::traceparent(&self.root)),
                ans: replay.answers().to_vec(),
                ask: self.asking(),
                nat: None,
            },
        };
        let state = self
            .engine
            .keys
            .seal_bounded(&claims)
            .map_err(|e| Ending::StateTooLarge {
                len: e.len,
                max: e.max,
            })?;
        Ok(InputRequired {
            requests,
            state,
            server_info: self.session.init.server_info.clone(),
        })
    }

    /// Waits for the client's retry, the TTL, or the server.
    async fn wait(&mut self) -> Wait {
        let expires = tokio::time::Instant::now() + self.engine.ttl;
        let mut shutdown = self.engine.shutdown.clone();
        loop {
            tokio::select! {
                // A stopping gateway cannot keep the question: the server hears `cancel` now.
                Ok(()) = shutdown.wait_for(|down| *down).map(|r| r.map(|_| ())) => return Wait::End(Ending::ShuttingDown),
                resume = next_resume(&mut self.resumes) => {
                    let Some(resume) = resume else { return Wait::End(Ending::ClientDisconnected) };
                    match Box::pin(self.try_resume(*resume)).await {
                        Resumed::Refused => {}
                        Resumed::Continue(client) => return Wait::Resumed(client),
                        Resumed::End(ending, client) => return Wait::EndWith(ending, client),
                    }
                }
                step = self.call.next() => match step {
                    // Nobody is listening between rounds.
                    CallStep::Event(CallEvent::Notification { .. }) => {}
                    // Guarded and asked when the next request attaches (its capabilities count).
                    CallStep::Event(CallEvent::ServerRequest { id, method, params }) => self.deferred.push((id, method, params)),
                    CallStep::Done(outcome) => return Wait::End(self.completed(outcome)),
                    // Between rounds the call was sent long ago: a session gone now took it along.
                    CallStep::Lost(e) | CallStep::NotSent(e) => return Wait::End(Ending::lost(e)),
                },
                () = tokio::time::sleep_until(expires) => return Wait::End(Ending::Expired(self.engine.ttl)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn operation_ids_are_32_lowercase_hex_digits_and_fresh_each_time() {
        let (a, b) = (super::operation_id(), super::operation_id());
        for id in [&a, &b] {
            assert_eq!(id.len(), 32, "{id}");
            assert!(
                id.bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
                "{id}"
            );
        }
        assert_ne!(a, b);
    }
}
