//! The capability profile: what a 2026 client declared it can answer
//! (elicitation form / url, sampling, roots), reduced to what a legacy
//! session must declare in `initialize`.
//!
//! Sessions are pooled per profile, so a server only ever learns exactly the
//! capabilities of the client it is working for, and its own fallback runs
//! when a capability is missing.

use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Profile {
    pub elicitation_form: bool,
    pub elicitation_url: bool,
    pub sampling: bool,
    pub sampling_tools: bool,
    pub sampling_context: bool,
    pub roots: bool,
}

impl Profile {
    /// Reads `_meta["io.modelcontextprotocol/clientCapabilities"]`.
    pub fn from_client_capabilities(caps: &Value) -> Profile {
        let mut p = Profile::default();
        if let Some(e) = caps.get("elicitation").and_then(Value::as_object) {
            // spec 2026-07-28 client/elicitation.mdx "Capabilities": an empty
            // `elicitation` object is equivalent to declaring form mode only.
            let form = e.get("form").is_some();
            let url = e.get("url").is_some();
            p.elicitation_form = form || !url;
            p.elicitation_url = url;
        }
        if let Some(s) = caps.get("sampling").and_then(Value::as_object) {
            p.sampling = true;
            p.sampling_tools = s.contains_key("tools");
            p.sampling_context = s.contains_key("context");
        }
        p.roots = caps.get("roots").is_some_and(Value::is_object);
        p
    }

    pub fn has_elicitation(&self) -> bool {
        self.elicitation_form || self.elicitation_url
    }

    /// The `capabilities` of the legacy `initialize` request: exactly this profile.
    pub fn initialize_capabilities(&self) -> Value {
        let mut caps = Map::new();
        if self.has_elicitation() {
            let mut modes = Map::new();
            if self.elicitation_form {
                modes.insert("form".into(), json!({}));
            }
            if self.elicitation_url {
                modes.insert("url".into(), json!({}));
            }
            caps.insert("elicitation".into(), Value::Object(modes));
        }
        if self.sampling {
            let mut s = Map::new();
            if self.sampling_tools {
                s.insert("tools".into(), json!({}));
            }
            if self.sampling_context {
                s.insert("context".into(), json!({}));
            }
            caps.insert("sampling".into(), Value::Object(s));
        }
        if self.roots {
            // Roots can change between requests in 2026 (they are asked per
            // request), so tell the server they may change.
            caps.insert("roots".into(), json!({"listChanged": true}));
        }
        Value::Object(caps)
    }

    /// A short stable label for logs and metrics, e.g. `elicitation.form+roots`.
    pub fn label(&self) -> String {
        let parts: Vec<&str> = [
            (self.elicitation_form, "elicitation.form"),
            (self.elicitation_url, "elicitation.url"),
            (self.sampling, "sampling"),
            (self.roots, "roots"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join("+")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_elicitation_means_form() {
        let p = Profile::from_client_capabilities(&json!({"elicitation": {}}));
        assert!(p.elicitation_form && !p.elicitation_url);
        assert_eq!(
            p.initialize_capabilities(),
            json!({"elicitation": {"form": {}}})
        );
    }

    #[test]
    fn declares_exactly_what_the_client_declared() {
        let p = Profile::from_client_capabilities(
            &json!({"elicitation": {"url": {}}, "sampling": {"tools": {}}, "roots": {}}),
        );
        assert!(
            !p.elicitation_form && p.elicitation_url && p.sampling && p.sampling_tools && p.roots
        );
        assert_eq!(
            p.initialize_capabilities(),
            json!({"elicitation": {"url": {}}, "sampling": {"tools": {}}, "roots": {"listChanged": true}})
        );
        assert_eq!(p.label(), "elicitation.url+sampling+roots");
        let none = Profile::from_client_capabilities(&json!({}));
        assert_eq!(none.initialize_capabilities(), json!({}));
        assert_eq!(none.label(), "none");
    }
}
