//! How the fixture's tools and prompts ask the client, in either mode.
//!
//! Legacy mode (the default): the question is *pushed* (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) while the request is pending, and
//! the answer comes back on the same session. The key is not sent: a legacy
//! server has none (redmark names the question from its policy file).
//!
//! Native mode (`--native`): the server speaks 2026-07-28 itself and is
//! stateless. The tool's code runs as a *replay*: each question is answered
//! from what the client already sent (the sealed `requestState`, then this
//! retry's `inputResponses`); the first unanswered ones, under the tool's own
//! keys, become rmcp's `InputRequiredResult`, with the answers used so far
//! sealed into a new `requestState` (rmcp's `RequestStateCodec`, bound to the
//! tool or prompt name). The same tool code thus asks both ways.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

#[allow(deprecated)] // sampling is SEP-2577-deprecated in rmcp, but part of 2025-11-25
use rmcp::model::CreateMessageRequestParams;
use rmcp::model::{
    ClientCapabilities, ElicitRequestParams, InputRequiredResult, InputResponses,
    RequestStateCodec, SealOptions,
};
use rmcp::{ErrorData, ServiceError};
use serde_json::{Value, json};

use super::{Ctx, de};

/// How long a sealed `requestState` may be echoed back.
const STATE_TTL: Duration = Duration::from_secs(600);

/// What a tool's question got: the client's answer, or why there is none
/// (in native mode, "not yet": the replay then ends in an `InputRequiredResult`).
pub type Answer = Result<Value, String>;

/// One request's way of asking.
pub struct Ask<'a> {
    ctx: &'a Ctx,
    native: Option<Round>,
}

/// A native request's replay: the answers the client gave, what is still to ask.
struct Round {
    target: String,
    given: BTreeMap<String, Value>,
    used: Mutex<BTreeMap<String, Value>>,
    unanswered: Mutex<BTreeMap<String, Value>>,
    missing: Mutex<Option<&'static str>>,
}

/// How a request ended: done, or it needs the client's input first.
pub enum Outcome<T> {
    Done(T),
    Input(InputRequiredResult),
}

/// What one question is: its method and params (as on the 2026-07-28 wire).
struct Question {
    method: &'static str,
    capability: &'static str,
    params: Value,
}

impl<'a> Ask<'a> {
    /// A legacy request: every question is pushed.
    pub fn push(ctx: &'a Ctx) -> Ask<'a> {
        Ask { ctx, native: None }
    }

    /// A native request to `target` (a tool or prompt name). A `requestState`
    /// that does not open (tampered, expired, for another target) is refused:
    /// spec 2026-07-28 MRTR "servers MUST verify the integrity of requestState".
    pub fn native(
        ctx: &'a Ctx,
        codec: &RequestStateCodec,
        target: &str,
        responses: Option<InputResponses>,
        state: Option<&str>,
    ) -> Result<Ask<'a>, ErrorData> {
        log_received(target, responses.as_ref(), state);
        let mut given: BTreeMap<String, Value> = match state {
            Some(state) => codec
                .open_json_with(state, target.as_bytes())
                .map_err(|e| {
                    let why = format!("requestState failed its integrity check: {e}");
                    ErrorData::invalid_params(why, None)
                })?,
            None => BTreeMap::new(),
        };
        for (key, answer) in responses.unwrap_or_default() {
            // What an earlier round sealed stands; a retry cannot rewrite it.
            given.entry(key).or_insert(answer);
        }
        let round = Round {
            target: target.to_owned(),
            given,
            used: Mutex::default(),
            unanswered: Mutex::default(),
            missing: Mutex::default(),
        };
        Ok(Ask {
            ctx,
            native: Some(round),
        })
    }

    /// `elicitation/create` in form mode for one required field of schema `property`.
    pub async fn elicit(&self, key: &str, message: &str, field: &str, property: Value) -> Answer {
        let schema = json!({
            "type": "object",
            "properties": {field: property},
            "required": [field],
        });
        self.elicit_form(key, message, schema).await
    }

    /// `elicitation/create` in form mode with the whole `requestedSchema`.
    pub async fn elicit_form(&self, key: &str, message: &str, schema: Value) -> Answer {
        let params = json!({
            "mode": "form",
            "message": message,
            "requestedSchema": schema,
        });
        let question = Question {
            method: "elicitation/create",
            capability: "elicitation",
            params,
        };
        self.ask(key, question).await
    }

    /// [`Ask::elicit`] for a field of one JSON type.
    pub async fn elicit_a(&self, key: &str, message: &str, field: &str, ty: &str) -> Answer {
        self.elicit(key, message, field, json!({"type": ty})).await
    }

    /// `sampling/createMessage` with one user message.
    pub async fn sample(&self, key: &str, text: &str, max_tokens: u32) -> Answer {
        let params = json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        });
        let question = Question {
            method: "sampling/createMessage",
            capability: "sampling",
            params,
        };
        self.ask(key, question).await
    }

    /// `roots/list`.
    pub async fn roots(&self, key: &str) -> Answer {
        let question = Question {
            method: "roots/list",
            capability: "roots",
            params: json!({}),
        };
        self.ask(key, question).await
    }

    async fn ask(&self, key: &str, question: Question) -> Answer {
        match &self.native {
            None => push(self.ctx, question).await,
            Some(round) => round.answer(self.ctx, key, question),
        }
    }

    /// The request's outcome: `done` when every question had its answer; the
    /// unanswered questions otherwise; `-32021` when one needs a capability
    /// the request did not declare (spec 2026-07-28 MRTR: a server MUST NOT
    /// send an input request the client has not declared the capability for).
    pub fn finish<T>(self, codec: &RequestStateCodec, done: T) -> Result<Outcome<T>, ErrorData> {
        let Some(round) = self.native else {
            return Ok(Outcome::Done(done));
        };
        if let Some(capability) = take(&round.missing) {
            let required: ClientCapabilities = de(json!({ capability: {} }));
            return Err(ErrorData::missing_required_client_capability(required));
        }
        let unanswered = take(&round.unanswered);
        if unanswered.is_empty() {
            return Ok(Outcome::Done(done));
        }
        let options = SealOptions::new()
            .associated_data(round.target.as_bytes())
            .ttl(STATE_TTL);
        let state = codec
            .seal_json_with(&take(&round.used), &options)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let requests = de(Value::Object(unanswered.into_iter().collect()));
        Ok(Outcome::Input(InputRequiredResult::new(
            Some(requests),
            Some(state),
        )))
    }
}

impl Round {
    fn answer(&self, ctx: &Ctx, key: &str, question: Question) -> Answer {
        let declared = ctx
            .client_capabilities()
            .and_then(|c| serde_json::to_value(c).ok())
            .is_some_and(|c| c.get(question.capability).is_some());
        if !declared {
            lock(&self.missing).get_or_insert(question.capability);
            return Err(format!("the client cannot answer {}", question.method));
        }
        match self.given.get(key) {
            Some(answer) if well_formed(question.method, answer) => {
                lock(&self.used).insert(key.to_owned(), answer.clone());
                Ok(answer.clone())
            }
            // Absent, or not an answer to this question: asked (again).
            _ => {
                let request = json!({"method": question.method, "params": question.params});
                lock(&self.unanswered).insert(key.to_owned(), request);
                Err(format!("{key}: input required"))
            }
        }
    }
}

/// Whether `answer` has the shape of a result of `method` (the suite sends
/// a number where an `ElicitResult` belongs; such an answer is asked again).
fn well_formed(method: &str, answer: &Value) -> bool {
    match method {
        "elicitation/create" => match answer.get("action").and_then(Value::as_str) {
            Some("accept") => answer.get("content").is_none_or(Value::is_object),
            Some("decline" | "cancel") => true,
            _ => false,
        },
        "sampling/createMessage" => answer.get("content").is_some() && answer.get("role").is_some(),
        "roots/list" => answer.get("roots").is_some_and(Value::is_array),
        _ => false,
    }
}

/// Pushes `question` on the legacy session and waits for its answer.
#[allow(deprecated)] // sampling and roots are SEP-2577-deprecated in rmcp, but part of 2025-11-25
async fn push(ctx: &Ctx, question: Question) -> Answer {
    let what = question.method;
    eprintln!("conformance-fixture: pushing {what}");
    let peer = &ctx.peer;
    let answer = async {
        let answer = match what {
            "elicitation/create" => {
                let params: ElicitRequestParams = de(question.params);
                to_json(peer.create_elicitation(params).await)
            }
            "sampling/createMessage" => {
                let params: CreateMessageRequestParams = de(question.params);
                to_json(peer.create_message(params).await)
            }
            _ => to_json(peer.list_roots().await),
        };
        answer.map_err(|e| format!("{what} failed: {e}"))
    };
    tokio::select! {
        answer = answer => answer,
        () = ctx.ct.cancelled() => Err(format!("{what}: the request was cancelled")),
    }
}

fn to_json<T: serde::Serialize>(answer: Result<T, ServiceError>) -> Result<Value, String> {
    let answer = answer.map_err(|e| e.to_string())?;
    serde_json::to_value(answer).map_err(|e| e.to_string())
}

/// Appends what a native request carried to `$FIXTURE_LOG` (JSON lines), so
/// tests can check what reached the server.
fn log_received(target: &str, responses: Option<&InputResponses>, state: Option<&str>) {
    let Some(path) = std::env::var_os("FIXTURE_LOG") else {
        return;
    };
    let line = json!({"event": "received", "target": target, "responses": responses,
        "state": state.is_some()});
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut file) = file {
        let _ = writeln!(file, "{line}");
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn take<T: Default>(m: &Mutex<T>) -> T {
    std::mem::take(&mut *lock(m))
}
