//! Step 10: the route's policy decides whether this call may be made at all
//! ([`crate::policy::call::on_call`]), before the server sees it.

use super::{Check, Halt, RequestCx};
use serde_json::Map;

use crate::policy::call::{Call, on_call, reads_arguments};

pub struct CallPolicy;

impl Check for CallPolicy {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let req = cx.request()?;
        if !req.method.is_operation() {
            return Ok(());
        }
        let policy = cx.route.policy.current();
        // The arguments' tree is built only for a rule that reads it.
        let none = Map::new();
        let arguments = if reads_arguments(&policy, req.target()) {
            req.arguments()
        } else {
            &none
        };
        let call = Call {
            principal: &cx.principal,
            method: req.method.as_str(),
            target: req.target(),
            arguments,
        };
        on_call(&policy, &call).map_err(|reject| Halt::refuse(Some(&req.id), reject))
    }
}
