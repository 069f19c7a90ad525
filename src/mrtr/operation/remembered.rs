//! An operation's side of remembered answers ([`crate::mrtr::remember`]):
//! a question's fields with a `remember` rule get the person's last
//! accepted value as their `default`, and an accepted answer becomes the
//! value remembered next.

use serde_json::Value;

use super::Operation;
use crate::mrtr::convert::Question;
use crate::mrtr::remember::digest;

impl Operation {
    /// The fields of `q` with a `remember` rule, and how long each is kept.
    fn remembering(&self, names: &[String]) -> Vec<(String, std::time::Duration)> {
        // Every anonymous caller is one principal: remembering would show
        // one person's answer to another.
        if self.principal == crate::protocol::Principal::anonymous() {
            return Vec::new();
        }
        let Some(rules) = self.policy.tool(&self.target).map(|t| &t.fields) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|f| Some((f.clone(), rules.get(f)?.remember?)))
            .collect()
    }

    fn remembered_at(&self, field: &str) -> String {
        digest(&self.route.name, &self.principal.name, &self.target, field)
    }

    /// Offers this person's remembered values as `q`'s defaults.
    pub(super) async fn offer_remembered(&self, q: &mut Question) {
        let fields = self.remembering(&q.field_names());
        if fields.is_empty() {
            return;
        }
        let mut defaults = Vec::new();
        for (field, _) in fields {
            if let Some(v) = self
                .engine
                .remembered
                .get(&self.remembered_at(&field))
                .await
            {
                defaults.push((field, v));
            }
        }
        q.offer_defaults(defaults);
    }

    /// Remembers the accepted values of `q`'s fields with a `remember` rule.
    pub(super) async fn keep_remembered(&self, answer: &Value) {
        if answer.get("action").and_then(Value::as_str) != Some("accept") {
            return;
        }
        let Some(content) = answer.get("content").and_then(Value::as_object) else {
            return;
        };
        let names: Vec<String> = content.keys().cloned().collect();
        for (field, ttl) in self.remembering(&names) {
            if let Some(v) = content.get(&field) {
                self.engine
                    .remembered
                    .put(&self.remembered_at(&field), v, ttl)
                    .await;
            }
        }
    }
}
