//! An operation's side of remembered answers ([`crate::mrtr::remember`]):
//! its principal, tool and route, for the [`Remembering`] every question
//! of the operation offers and keeps through.

use serde_json::Value;

use super::Operation;
use crate::mrtr::convert::Question;
use crate::mrtr::remember::Remembering;

impl Operation {
    fn remembering(&self) -> Remembering<'_> {
        Remembering {
            remembered: &self.engine.remembered,
            policy: &self.policy,
            route: &self.route.name,
            principal: &self.principal,
            tool: &self.target,
            arguments: self.arguments.value(),
        }
    }

    /// Offers this person's remembered values as `q`'s defaults.
    pub(super) async fn offer_remembered(&self, q: &mut Question) {
        self.remembering().offer(q).await;
    }

    /// Remembers the accepted values of `q`'s fields with a `remember` rule.
    pub(super) async fn keep_remembered(&self, q: &Question, answer: &Value) {
        self.remembering().keep(q, answer).await;
    }
}
