//! A call in flight on a leased session: how it starts, the events its
//! server sends for it, its answer, and its cancellation upstream when the
//! caller gives it up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

use super::{CallSink, Outcome, Posted, Session, outcome};
use crate::jsonrpc::{ErrorObject, Id, Message, Payload};
use crate::upstream::{UpstreamError, lock};

/// How long a call given up is read after `notifications/cancelled` for the
/// server to end it. Short: nobody waits for it but the session's next lease.
/// (A call whose questions were answered first gets the caller's longer
/// `settle`: see [`Call::end`].)
pub const END_GRACE: Duration = Duration::from_secs(2);

/// Depth of a call's event queue. Pushed requests wait for room; progress and
/// log notifications beyond it are dropped (counted, and logged once per call)
/// rather than buffered forever.
pub(super) const CALL_QUEUE_DEPTH: usize = 64;

/// Request-scoped traffic for one call in flight.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent {
    /// `notifications/progress`, `notifications/message`, `notifications/cancelled`, ...
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A pushed request (`elicitation/create`, `sampling/createMessage`, `roots/list`, ...).
    ServerRequest {
        id: Id,
        method: String,
        params: Option<Value>,
    },
}

/// What a call produced next.
#[derive(Debug)]
pub enum CallStep {
    Event(CallEvent),
    /// The call's answer: a result as the server sent it where it could be kept so.
    Done(Result<Payload, ErrorObject>),
    Lost(UpstreamError),
    /// The session was gone before the server processed the call (HTTP
    /// 404): [`Call::unsent`] gives it back to send on another session.
    NotSent(UpstreamError),
}

/// How reading a call given up ended.
enum Reading {
    Ended,
    AskedAgain,
    TimedOut,
}

/// A call's request, kept until the server is known to have it.
#[derive(Debug)]
pub struct Unsent {
    pub method: String,
    pub params: Option<Payload>,
}

/// The call in flight on a leased session.
pub struct Call {
    pub upstream_id: i64,
    /// Notifications dropped because the call's queue was full.
    dropped: Arc<AtomicU64>,
    events: futures::channel::mpsc::Receiver<Box<CallEvent>>,
    /// The call's POST, in flight in the caller's task ([`Direct`](super::Direct)): it
    /// gives the outcome of a plain JSON answer; any other answer comes to
    /// `response` through the dispatcher.
    posting: Option<Posting>,
    response: oneshot::Receiver<Result<Payload, ErrorObject>>,
    session: Arc<Session>,
    finished: bool,
    /// The request, while its POST is on its way (HTTP): a session the
    /// server ended just before it arrived leaves it to go out again.
    unsent: Option<Unsent>,
    /// The server asked something during the call. Every push is answered
    /// (by the client, by policy, or with `cancel`/an error when the call is
    /// given up), so such a call is one the server can end on its own.
    asked: bool,
}

/// Wrapped to be `Sync` (an operation is borrowed across its awaits): only
/// ever polled through `&mut`, never shared.
type Posting = sync_wrapper::SyncFuture<std::pin::Pin<Box<dyn Future<Output = Posted> + Send>>>;

impl Session {
    /// Starts the call of this lease; its request-scoped traffic arrives on the returned [`Call`].
    pub async fn call(
        self: &Arc<Self>,
        method: &str,
        params: Option<Payload>,
    ) -> Result<Call, UpstreamError> {
        let (events_tx, events_rx) = futures::channel::mpsc::channel(CALL_QUEUE_DEPTH);
        let dropped = Arc::new(AtomicU64::new(0));
        let (id, response) = self.register();
        lock(&self.state.calls).insert(
            id,
            CallSink {
                tx: events_tx,
                dropped: dropped.clone(),
            },
        );
        let direct = self.ready_direct().is_some();
        // Kept only where the server can refuse the session before it reads
        // the request (an HTTP 404): a clone, dropped once the POST is answered.
        let unsent = direct.then(|| Unsent {
            method: method.to_owned(),
            params: params.clone(),
        });
        let msg = Message::Request {
            id: Id::Number(id),
            method: method.into(),
            params,
        };
        let posting = match self.ready_direct() {
            // Boxed: the POST's future is large, and the call holds it only
            // until the answer's head (or its JSON body) is in.
            Some(direct) => {
                let direct = direct.clone();
                Some(sync_wrapper::SyncFuture::new(Box::pin(
                    async move { direct.request(msg, id).await },
                ) as _))
            }
            None => {
                if let Err(e) = self.send(msg).await {
                    lock(&self.state.calls).remove(&id);
                    lock(&self.state.pending).remove(&id);
                    return Err(e);
                }
                None
            }
        };
        Ok(Call {
            upstream_id: id,
            dropped,
            events: events_rx,
            posting,
            response,
            session: self.clone(),
            finished: false,
            unsent,
            asked: false,
        })
    }
}

impl Call {
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Notifications of this call dropped so far because its queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The next event, or the final answer. The dispatcher queues events before
    /// it hands over the response, so polling events first (`biased`) delivers
    /// everything the server sent before its answer, in order.
    pub async fn next(&mut self) -> CallStep {
        if self.finished {
            return CallStep::Lost(UpstreamError::Lost("the call already ended".into()));
        }
        let step = tokio::select! {
            biased;
            Some(ev) = futures::StreamExt::next(&mut self.events) => {
                self.asked |= matches!(*ev, CallEvent::ServerRequest { .. });
                CallStep::Event(*ev)
            }
            outcome = outcome(&mut self.posting, &mut self.response) => {
                self.finish();
                match outcome {
                    Outcome::Answered(o) => {
                        // Answered on the POST itself: its waiter is still registered.
                        lock(&self.session.state.pending).remove(&self.upstream_id);
                        self.unsent = None;
                        CallStep::Done(o)
                    }
                    Outcome::Lost => {
                        self.unsent = None;
                        CallStep::Lost(self.session.lost())
                    }
                    Outcome::NotSent => {
                        lock(&self.session.state.pending).remove(&self.upstream_id);
                        CallStep::NotSent(UpstreamError::Lost(
                            "the server had ended the HTTP session (404) before the call reached it"
                                .into(),
                        ))
                    }
                }
            }
        };
        if self.posting.is_none() {
            // The server has the call (or the session is gone): nothing to send again.
            self.unsent = self
                .unsent
                .take()
                .filter(|_| matches!(step, CallStep::NotSent(_)));
        }
        step
    }

    /// The request of a call the server never processed ([`CallStep::NotSent`]).
    pub fn unsent(&mut self) -> Option<Unsent> {
        self.unsent.take()
    }

    /// Gives the call up as a good client does, once the caller has answered
    /// every question it asked (`cancel` for an elicitation, an error for a
    /// capability the client lacks or a question policy refused): a call that
    /// asked something is read until the server ends it, for at most
    /// `settle`; only a call still running then, or one that asks again (it
    /// did not take the hint), or at once one that never asked anything (a
    /// silent server has nothing to end it on), hears
    /// `notifications/cancelled`, and is read for another [`END_GRACE`].
    /// True when the server ended it: the session is then as good as
    /// before. A call still running after that is abandoned: its session is
    /// not reused unless it is multiplexed (late traffic of the call could
    /// otherwise be taken for the next call's).
    ///
    /// `settle` is long (the route's `end_grace`, 30 s by default) on purpose: the
    /// server has its answer and is winding the call down, and a
    /// cancellation that lands while it finishes is what breaks real
    /// servers. PyPI `mcp` 1.x answers the cancelled request, then answers
    /// it again when the handler returns, and its `AssertionError` ends the
    /// whole HTTP session (the next POST gets 404) or, over stdio, the
    /// process; on a loaded machine a two-second grace was not enough. So
    /// correctness never rests on how fast a server finishes: only a
    /// server that keeps a call running long after its answer hears
    /// `notifications/cancelled`.
    ///
    /// Questions the call asks meanwhile are not answered: they belong to a
    /// call being cancelled, and answering a server that floods questions
    /// would only keep it going.
    ///
    /// The order matters: spec 2025-11-25 basic/utilities/cancellation.mdx
    /// "Cancellation notifications MUST only reference requests that [...]
    /// are believed to still be in-progress", and a server told `cancel`
    /// usually ends the call at once; both parties "MUST handle these race
    /// conditions gracefully", which not every server does.
    pub async fn end(&mut self, reason: &str, settle: Duration) -> bool {
        if self.finished {
            return true;
        }
        if self.asked {
            match self.read_to_end(settle, true).await {
                Reading::Ended => return true,
                Reading::AskedAgain | Reading::TimedOut => {}
            }
        }
        self.session.cancel_now(self.upstream_id, reason).await;
        // Still registered: the server's last words for the call (mcp 1.x
        // answers a cancelled request with an error) are read, not left
        // for nobody on the stream.
        let ended = matches!(self.read_to_end(END_GRACE, false).await, Reading::Ended);
        if !ended {
            // Late traffic for it must not be taken for another call's.
            self.session.state.abandoned.store(true, Ordering::Release);
            lock(&self.session.state.pending).remove(&self.upstream_id);
        }
        self.finish();
        ended
    }

    /// Reads the call for at most `limit`, until its answer is in or its
    /// session is gone; with `stop_on_question`, also until it asks
    /// something. Notifications are dropped.
    async fn read_to_end(&mut self, limit: Duration, stop_on_question: bool) -> Reading {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.next()).await {
                Err(_) => return Reading::TimedOut,
                Ok(CallStep::Done(_) | CallStep::Lost(_) | CallStep::NotSent(_)) => {
                    return Reading::Ended;
                }
                Ok(CallStep::Event(CallEvent::ServerRequest { .. })) if stop_on_question => {
                    return Reading::AskedAgain;
                }
                Ok(CallStep::Event(_)) => {}
            }
        }
    }

    fn finish(&mut self) {
        self.finished = true;
        lock(&self.session.state.calls).remove(&self.upstream_id);
    }
}

impl Drop for Call {
    /// A call dropped before it ended (its operation's task went away) can
    /// only be cancelled at once: nothing is left to read it.
    fn drop(&mut self) {
        if !self.finished {
            self.session
                .cancel(self.upstream_id, "redmark: the client went away");
            self.finish();
        }
    }
}
