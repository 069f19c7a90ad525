//! What a client receives when redmark says no: one JSON-RPC error whose
//! code, HTTP status and `data.reason` come from the [`Reason`] table.
//!
//! Each layer keeps its own typed error (`upstream::UpstreamError`,
//! `mrtr::state::StateError`, `front::auth::AuthError`, ...) and turns it into
//! a [`Reject`] with [`IntoReject`] where it reaches a client.

use http::StatusCode;
use serde_json::{Map, Value};

use super::reason::{Fault, Reason};
use crate::jsonrpc::{ErrorObject, Id, error_response};

/// A refusal ready to be written to the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject {
    pub reason: Reason,
    pub message: String,
    /// Extra `data` members besides `reason`.
    pub data: Map<String, Value>,
}

impl Reject {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            data: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.to_owned(), value.into());
        self
    }

    pub fn status(&self) -> StatusCode {
        self.reason.status()
    }

    pub fn code(&self) -> i64 {
        self.reason.code()
    }

    pub fn fault(&self) -> Fault {
        self.reason.fault()
    }

    pub fn error_object(&self) -> ErrorObject {
        let mut data = self.data.clone();
        data.insert("reason".into(), self.reason.as_str().into());
        ErrorObject::new(self.code(), self.message.clone()).with_data(Value::Object(data))
    }

    /// The whole JSON-RPC error response (`id` absent when it could not be read).
    pub fn response(&self, id: Option<&Id>) -> Value {
        error_response(id, &self.error_object())
    }
}

/// Implemented by every error that can reach a client.
pub trait IntoReject {
    fn into_reject(self) -> Reject;
}

impl IntoReject for Reject {
    fn into_reject(self) -> Reject {
        self
    }
}
