//! What a client receives when redmark says no: one JSON-RPC error with the
//! right code, an HTTP status, and a `data.reason` a program can match on.
//!
//! Each layer keeps its own typed error (`front::FrontError`,
//! `upstream::UpstreamError`, ...) and turns it into a [`Reject`] at the edge.

use http::StatusCode;
use serde_json::{Map, Value};

use crate::jsonrpc::ErrorObject;

/// Where a fault lies: decides log level and lets an operator tell at a
/// glance whether to look at the client, the server behind us, or redmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Client,
    Upstream,
    Gateway,
}

/// A refusal ready to be written to the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject {
    pub status: StatusCode,
    pub code: i64,
    pub reason: &'static str,
    pub message: String,
    pub fault: Fault,
    /// Extra `data` members besides `reason`.
    pub data: Map<String, Value>,
}

impl Reject {
    pub fn new(
        status: StatusCode,
        code: i64,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code,
            reason,
            message: message.into(),
            fault: Fault::Client,
            data: Map::new(),
        }
    }

    pub fn fault(mut self, fault: Fault) -> Self {
        self.fault = fault;
        self
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.to_owned(), value.into());
        self
    }

    pub fn error_object(&self) -> ErrorObject {
        let mut data = self.data.clone();
        data.insert("reason".into(), self.reason.into());
        ErrorObject::new(self.code, self.message.clone()).with_data(Value::Object(data))
    }
}

/// Implemented by every error that can reach a client.
pub trait IntoReject {
    fn into_reject(self) -> Reject;
}
