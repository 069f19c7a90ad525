//! The call-level hook: whether this principal may make this call at all,
//! before the server sees it. The third place a policy acts, beside
//! [`super::guard`] (the server's questions) and [`super::answer`] (the
//! person's answers).
//!
//! Policy files have no call-level rules yet, so every call is allowed; the
//! hook is where rules on tool arguments and per-tool scopes go.

use serde_json::{Map, Value};

use super::Policy;
use crate::protocol::{Principal, Reject};

/// The call a rule looks at.
pub struct Call<'a> {
    pub principal: &'a Principal,
    pub method: &'a str,
    /// Tool or prompt name, or resource URI.
    pub target: &'a str,
    pub arguments: &'a Map<String, Value>,
}

/// `Err`: the call never reaches the server, and the client hears why.
pub fn on_call(_policy: &Policy, _call: &Call<'_>) -> Result<(), Reject> {
    Ok(())
}
