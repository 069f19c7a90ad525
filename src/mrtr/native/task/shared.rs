//! A relayed task's call arguments, kept for the replica that takes the
//! task over: the policy's CEL rules (`allow`, `authz`) read
//! `tool.arguments`, and a task id is too small a place for them (it rides
//! in every `Mcp-Name`). With a shared `[state] store` the relaying replica
//! keeps them there, sealed with the state key (they are user data), until
//! the task expires; a replica adopting the task reads them back. Without
//! one, or when the store does not answer, an adopted task has none, and a
//! rule that reads them refuses the answer (`policy_error`), never passes
//! it unchecked.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mrtr::Engine;

/// Most bytes of arguments kept: beyond this the task keeps them on its
/// relaying replica only.
pub const MAX_SHARED_ARGUMENTS: usize = 64 * 1024;

/// What is sealed: the arguments, and whose task they are (a sealed value
/// copied under another task's key must not pass for that task's).
#[derive(Serialize, Deserialize)]
struct Kept {
    task: String,
    arguments: Value,
}

/// Keeps `arguments` of the task named `mark` for `ttl`, when the
/// replicas share a store.
pub(super) async fn keep(engine: &Arc<Engine>, mark: &str, arguments: &Value, ttl: Duration) {
    let Some(store) = engine.relayed_tasks.store() else {
        return;
    };
    if arguments.is_null() {
        return;
    }
    let kept = Kept {
        task: mark.to_owned(),
        arguments: arguments.clone(),
    };
    let plain = match serde_json::to_vec(&kept) {
        Ok(p) if p.len() <= MAX_SHARED_ARGUMENTS => p,
        _ => {
            tracing::info!(
                task = mark,
                "a relayed task's arguments are over {MAX_SHARED_ARGUMENTS} bytes: not shared; a replica taking it over refuses rules that read them"
            );
            return;
        }
    };
    let sealed = engine.keys.current().seal_payload(&plain);
    if let Err(e) = store.keep_task_arguments(mark, &sealed, ttl).await {
        tracing::warn!(task = mark, error = %e, "a relayed task's arguments could not be shared; a replica taking it over refuses rules that read them");
    }
}

/// The arguments kept for the task named `mark`; `null` when none are.
pub(super) async fn read(engine: &Arc<Engine>, mark: &str) -> Value {
    let Some(store) = engine.relayed_tasks.store() else {
        return Value::Null;
    };
    let sealed = match store.task_arguments(mark).await {
        Ok(Some(sealed)) => sealed,
        Ok(None) => return Value::Null,
        Err(e) => {
            tracing::warn!(task = mark, error = %e, "a relayed task's arguments could not be read; rules that read them refuse its answers");
            return Value::Null;
        }
    };
    let Ok(plain) = engine.keys.current().open_payload(&sealed) else {
        return Value::Null;
    };
    match serde_json::from_slice::<Kept>(&plain) {
        Ok(kept) if kept.task == mark => kept.arguments,
        _ => Value::Null,
    }
}
