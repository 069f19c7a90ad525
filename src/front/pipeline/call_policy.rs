//! Step 10: the route's policy decides whether this call may be made at all
//! ([`crate::policy::call::on_call`]), before the server sees it.

use super::{Check, Halt, RequestCx};
use crate::policy::call::{Call, on_call};

pub struct CallPolicy;

impl Check for CallPolicy {
    fn check(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let req = cx.request()?;
        if !req.method.is_operation() {
            return Ok(());
        }
        let policy = cx.route.policy.current();
        let call = Call {
            principal: &cx.principal,
            method: req.method.as_str(),
            target: req.target(),
            arguments: req.arguments(),
        };
        on_call(&policy, &call).map_err(|reject| Halt::refuse(Some(&req.id), reject))
    }
}
