//! One round of questions as the driver ([`super`]) holds it: read back
//! from the engine's `input_required` answer (either kind of server), and
//! the retry that gives it up.

use serde_json::{Map, Value, json};

use crate::mrtr::outgoing::Body;
use crate::protocol::ClientRequest;

/// One round of questions: each input request by its key, and the state the
/// retry presents.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    pub requests: Vec<(String, Value)>,
    pub state: Option<String>,
}

impl Round {
    /// The round a final answer asks, if it is an `input_required` result.
    pub fn asked(body: &Body) -> Option<Round> {
        match body {
            Body::InputRequired { result, .. } => Some(Round {
                requests: result
                    .requests
                    .iter()
                    .map(|(k, raw)| {
                        (
                            k.clone(),
                            serde_json::from_str(raw.get()).unwrap_or(Value::Null),
                        )
                    })
                    .collect(),
                state: Some(result.state.clone()),
            }),
            Body::Json(v) => {
                let result = v.get("result")?;
                if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
                    return None;
                }
                let requests = result
                    .get("inputRequests")
                    .and_then(Value::as_object)
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default();
                let state = result
                    .get("requestState")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                Some(Round { requests, state })
            }
            Body::Relayed { .. } => None,
        }
    }

    /// The retry that gives this round up: `cancel` for every open
    /// elicitation, with the round's state; none for a round without state.
    pub fn cancel_retry(&self, template: &ClientRequest) -> Option<ClientRequest> {
        let state = self.state.clone()?;
        let cancels: Map<String, Value> = self
            .requests
            .iter()
            .filter_map(|(k, r)| answer_to_error(r).map(|c| (k.clone(), c)))
            .collect();
        Some(template.retried_with(cancels, state))
    }
}

/// What a question's answer is when the client answered it with a JSON-RPC
/// error: an elicitation is then cancelled (the user did not get to answer);
/// other questions have no answer that says so, and end the call.
pub fn answer_to_error(request: &Value) -> Option<Value> {
    (request.get("method").and_then(Value::as_str) == Some("elicitation/create"))
        .then(|| json!({"action": "cancel"}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({"method": "elicitation/create", "params": {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}}}})
    }

    #[test]
    fn an_input_required_result_reads_back_as_a_round() {
        let body = Body::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "input_required", "inputRequests": {"a": form()}, "requestState": "s"
        }}));
        let r = Round::asked(&body).unwrap();
        assert_eq!(r.requests, vec![("a".to_owned(), form())]);
        assert_eq!(r.state.as_deref(), Some("s"));
        let done =
            Body::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}));
        assert!(Round::asked(&done).is_none());
    }

    #[test]
    fn an_error_answer_cancels_an_elicitation_only() {
        assert_eq!(answer_to_error(&form()), Some(json!({"action": "cancel"})));
        assert_eq!(answer_to_error(&json!({"method": "roots/list"})), None);
    }

    fn call() -> ClientRequest {
        use crate::jsonrpc::Id;
        use crate::protocol::profile::Profile;
        use crate::protocol::{ClientParams, Method, RequestContext};
        let params = json!({"name": "book", "arguments": {"room": "a"}});
        let ctx = RequestContext {
            protocol_version: "2026-07-28".into(),
            capabilities: json!({}),
            client_info: None,
            log_level: None,
            progress_token: None,
            profile: Profile::default(),
            traceparent: None,
            tracestate: None,
            access: Default::default(),
        };
        let params = ClientParams::from(params.as_object().cloned().unwrap_or_default());
        ClientRequest::new(Id::Number(1), Method::ToolsCall, params, ctx, Vec::new())
    }

    #[test]
    fn giving_a_round_up_cancels_each_elicitation_with_its_state() {
        let round = Round {
            requests: vec![
                ("a".into(), form()),
                ("roots".into(), json!({"method": "roots/list"})),
            ],
            state: Some("s".into()),
        };
        let retry = round.cancel_retry(&call()).unwrap();
        assert!(retry.is_retry());
        assert_eq!(retry.params["requestState"], "s");
        assert_eq!(
            retry.params["inputResponses"],
            json!({"a": {"action": "cancel"}}),
            "only an elicitation has an answer that says cancel"
        );
        let stateless = Round {
            state: None,
            ..round
        };
        assert!(stateless.cancel_retry(&call()).is_none());
    }
}
