//! One driver for a call whose `input_required` rounds redmark answers on
//! its client's behalf: a 2025-era client's call (`era2025::call`, each
//! question pushed on the call's stream) and a gateway-made task
//! (`tasks::driver`, each question read and answered through `tasks/*`).
//!
//! Both run the same loop through the same engine, policy and audit as any
//! call (`front::dispatch`): the call, then for each round its answers
//! gathered from the client and the retry sent with them and the round's
//! `requestState`, byte for byte, until the final answer, the client gives
//! up, or a deadline. The engine judges every retry's answers, so an
//! invalid one comes back as the next round and never reaches the server.
//! Where the answers come from and where the call's ending goes is an
//! [`Answers`]; this module owns only the order of things.
//!
//! A round given up (the client left or cancelled, nobody answered in
//! time) is not left hanging on the server: the retry that gives it up
//! answers `cancel` to every open elicitation ([`Round::cancel_retry`]),
//! and what the server answers then is nobody's.
//!
//! - [`round`]: one round's questions, read back from the engine's answer.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::front::Gateway;
use crate::front::dispatch::{self, Reply};
use crate::mrtr::Outgoing;
use crate::mrtr::state::Claims;
use crate::protocol::{ClientRequest, Principal, Reason, Reject};
use crate::route::Route;

mod round;

pub use self::round::{Round, answer_to_error};

/// Everything a call's rounds share.
pub struct Call {
    pub gw: Arc<Gateway>,
    pub route: Arc<Route>,
    pub principal: Principal,
    /// The call as first sent: each retry is this plus a round's answers.
    pub template: ClientRequest,
}

/// What the call waits for next.
pub enum Next {
    Round(Round),
    /// The engine's stream: its first notification, then the rest and the
    /// final answer.
    Stream(Option<Value>, mpsc::Receiver<Outgoing>),
    /// The final answer, as the engine wrote it.
    Done(Outgoing),
    /// The engine's stream ended without an answer.
    Lost,
}

/// How long a server told `cancel` for a round given up has to end the
/// call itself; past that the retry's answer is dropped, and the engine,
/// hearing nobody listens, cancels the server's call
/// (`notifications/cancelled`).
#[derive(Debug, Clone, Copy)]
pub enum Grace {
    /// Until the retry's first output.
    FirstOutput(Duration),
    /// Until the retry's final answer: the dispatch and then its stream
    /// each get this long.
    Final(Duration),
}

/// Where a round's answers come from, and where the call's ending goes.
///
/// `Stop` says why the call was given up; [`Answers::stop`] tells whoever
/// waits for the call, and the driver then gives up the open round on the
/// server's side.
pub trait Answers: Sync {
    type Stop: Send;

    /// Resolves when the call is to be given up, whatever it waits for
    /// (the engine's answer, its stream, or a round's answers).
    async fn interrupted(&self) -> Self::Stop;

    /// A notification on the engine's stream.
    async fn notify(&self, notification: Value) -> Result<(), Self::Stop>;

    /// Asks the client a round's questions and waits for every answer.
    async fn gather(&self, call: &Call, round: &Round) -> Result<Map<String, Value>, Self::Stop>;

    /// The engine's final answer.
    async fn answer(&self, call: &Call, out: Outgoing);

    /// The call ends with redmark's own refusal.
    async fn fail(&self, call: &Call, reject: Reject);

    /// The call was given up.
    async fn stop(&self, call: &Call, why: Self::Stop);

    /// How long the server has to end a call whose round was given up.
    fn grace(&self, call: &Call) -> Grace;
}

impl Call {
    /// The call (or a retry) through the engine, until its first output.
    pub async fn dispatch(&self, req: Box<ClientRequest>, verified: Option<Box<Claims>>) -> Reply {
        dispatch::dispatch(
            &self.gw,
            self.route.clone(),
            self.principal.clone(),
            req,
            verified,
        )
        .await
    }

    /// Sends the call, then drives it to its end.
    pub async fn run<A: Answers>(&self, answers: &A, first: Box<ClientRequest>) {
        match self.send(answers, first).await {
            Ok(next) => self.drive(answers, next).await,
            Err(why) => answers.stop(self, why).await,
        }
    }

    /// Drives a call already sent, from what it waits for next, to its end.
    pub async fn drive<A: Answers>(&self, answers: &A, mut next: Next) {
        loop {
            next = match next {
                Next::Done(out) => return answers.answer(self, out).await,
                Next::Lost => {
                    return answers
                        .fail(
                            self,
                            Reject::new(
                                Reason::InternalError,
                                "the operation ended without an answer",
                            ),
                        )
                        .await;
                }
                // Whichever way this returns, `rx` is dropped: the engine
                // hears nobody listens, and cancels a call still running.
                Next::Stream(first, rx) => match self.relay(answers, first, rx).await {
                    Ok(next) => next,
                    Err(why) => return answers.stop(self, why).await,
                },
                Next::Round(round) => {
                    let given = match answers.gather(self, &round).await {
                        Ok(given) => given,
                        Err(why) => {
                            answers.stop(self, why).await;
                            return self.give_up(&round, answers.grace(self));
                        }
                    };
                    let Some(state) = round.state else {
                        return answers
                            .fail(
                                self,
                                Reject::new(
                                    Reason::UpstreamIncompatible,
                                    "the server asked for input without a requestState to retry with",
                                ),
                            )
                            .await;
                    };
                    let retry = self.template.retried_with(given, state);
                    match self.send(answers, Box::new(retry)).await {
                        Ok(next) => next,
                        Err(why) => return answers.stop(self, why).await,
                    }
                }
            };
        }
    }

    /// The call (or a retry) until its first output, unless it is given up
    /// first: then the call is dropped, and the engine, hearing nobody
    /// listens, cancels the server's call.
    async fn send<A: Answers>(
        &self,
        answers: &A,
        req: Box<ClientRequest>,
    ) -> Result<Next, A::Stop> {
        tokio::select! {
            reply = self.dispatch(req, None) => Ok(Next::of(reply)),
            why = answers.interrupted() => Err(why),
        }
    }

    /// The engine's stream until its final answer (or the round it asks),
    /// its notifications passed on.
    async fn relay<A: Answers>(
        &self,
        answers: &A,
        first: Option<Value>,
        mut rx: mpsc::Receiver<Outgoing>,
    ) -> Result<Next, A::Stop> {
        if let Some(first) = first {
            answers.notify(first).await?;
        }
        loop {
            let out = tokio::select! {
                out = rx.recv() => out,
                why = answers.interrupted() => return Err(why),
            };
            match out {
                Some(Outgoing::Notification(n)) => answers.notify(n).await?,
                Some(done @ Outgoing::Final { .. }) => return Ok(Next::of(Reply::Json(done))),
                None => return Ok(Next::Lost),
            }
        }
    }

    /// Gives a round up on the server's side: `cancel` for every open
    /// elicitation, with the round's state, in a retry whose answer is
    /// nobody's.
    fn give_up(&self, round: &Round, grace: Grace) {
        let Some(retry) = round.cancel_retry(&self.template) else {
            // Nothing to retry with: the call's stream, dropped, is what
            // tells the engine to cancel.
            return;
        };
        let (gw, route, principal) = (self.gw.clone(), self.route.clone(), self.principal.clone());
        tokio::spawn(async move {
            let sent = dispatch::dispatch(&gw, route, principal, Box::new(retry), None);
            match grace {
                Grace::FirstOutput(within) => {
                    let _ = tokio::time::timeout(within, sent).await;
                }
                Grace::Final(within) => {
                    let reply = tokio::time::timeout(within, sent).await;
                    if let Ok(Reply::Stream { mut rx, .. }) = reply {
                        let _ = tokio::time::timeout(within, async {
                            while let Some(out) = rx.recv().await {
                                if matches!(out, Outgoing::Final { .. }) {
                                    break;
                                }
                            }
                        })
                        .await;
                    }
                }
            }
        });
    }
}

impl Next {
    /// What a dispatched call or retry leads to next.
    pub fn of(reply: Reply) -> Next {
        match reply {
            Reply::Json(Outgoing::Final {
                status,
                body,
                outcome,
            }) => match Round::asked(&body) {
                Some(round) => Next::Round(round),
                None => Next::Done(Outgoing::Final {
                    status,
                    body,
                    outcome,
                }),
            },
            // `dispatch` answers a notification with a stream; a lone one
            // ends as a stream that ends without an answer would.
            Reply::Json(Outgoing::Notification(n)) => Next::Stream(Some(n), mpsc::channel(1).1),
            Reply::Stream { first, rx } => Next::Stream(Some(first), rx),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use serde_json::json;

    use super::*;
    use crate::mrtr::outgoing::{Body, Outcome};

    fn final_of(result: Value) -> Reply {
        Reply::Json(Outgoing::Final {
            status: StatusCode::OK,
            body: Body::Json(json!({"jsonrpc": "2.0", "id": 1, "result": result})),
            outcome: Outcome::Ok,
        })
    }

    #[test]
    fn an_input_required_answer_is_a_round_to_gather() {
        let asked = final_of(json!({
            "resultType": "input_required",
            "inputRequests": {"room": {"method": "elicitation/create", "params": {}}},
            "requestState": "s1"
        }));
        let Next::Round(round) = Next::of(asked) else {
            panic!("an input_required result is a round");
        };
        assert_eq!(round.requests.len(), 1);
        assert_eq!(round.requests[0].0, "room");
        assert_eq!(round.state.as_deref(), Some("s1"));
    }

    #[test]
    fn a_complete_answer_is_the_end_as_the_engine_wrote_it() {
        let done = final_of(json!({"resultType": "complete", "content": []}));
        let Next::Done(Outgoing::Final { body, .. }) = Next::of(done) else {
            panic!("a complete result ends the call");
        };
        assert_eq!(
            body,
            Body::Json(
                json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}})
            )
        );
    }

    #[tokio::test]
    async fn a_lone_notification_is_a_stream_that_ends_without_an_answer() {
        let lone = Reply::Json(Outgoing::Notification(json!({"method": "n"})));
        let Next::Stream(Some(first), mut rx) = Next::of(lone) else {
            panic!("a notification starts a stream");
        };
        assert_eq!(first["method"], "n");
        assert!(rx.recv().await.is_none(), "nothing follows it");
    }
}
