//! One reader per polled task on a replica, shared by every listen that
//! watches it ([`super::notify`]): a task another replica holds, or a
//! native server's relayed task, is read (`tasks/get`) once per interval
//! however many listens name it. Without the sharing, each listen read it
//! on its own, and a client opening many listens on one task multiplied the
//! reads that reach the owner and the server; now a listen costs what the
//! first one did ("a listen must not cost the server more than polling
//! would").
//!
//! A reader lives while a listen watches its task: it stops when the task
//! ends, when it can no longer be read, or when its last listener leaves.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::task::Status;

/// What a shared reader last read of its task.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// Nothing read yet.
    Pending,
    /// The task as `tasks/get` returned it (without `resultType`).
    Read(Arc<Value>),
    /// It could not be read (unknown, lost, or the owner refused): nothing
    /// follows.
    Gone,
}

impl Reading {
    /// True when nothing more will be read: the task ended, or is gone.
    pub fn is_final(&self) -> bool {
        match self {
            Reading::Pending => false,
            Reading::Gone => true,
            Reading::Read(task) => Status::of(task).is_some_and(Status::is_terminal),
        }
    }
}

/// Whose reading it is: a task id read as one principal on one route (the
/// id is sealed to both, and a reader reads as its first listener).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PollKey {
    pub route: Arc<str>,
    pub principal: Arc<str>,
    pub task_id: String,
}

type Readers = Arc<Mutex<HashMap<PollKey, watch::Sender<Reading>>>>;

/// The shared readers of this replica.
#[derive(Default)]
pub struct Polls {
    readers: Readers,
}

impl Polls {
    /// A subscription to `key`'s reading: the running reader's, or a new
    /// one's that reads with `read` every `every`.
    pub fn subscribe<R, F>(
        &self,
        key: PollKey,
        every: Duration,
        read: R,
    ) -> watch::Receiver<Reading>
    where
        R: Fn() -> F + Send + 'static,
        F: Future<Output = Option<Value>> + Send + 'static,
    {
        let mut readers = lock(&self.readers);
        if let Some(running) = readers.get(&key) {
            return running.subscribe();
        }
        let (tx, rx) = watch::channel(Reading::Pending);
        readers.insert(key.clone(), tx.clone());
        tokio::spawn(run(self.readers.clone(), key, tx, every, read));
        rx
    }

    /// Readers running now.
    pub fn running(&self) -> usize {
        lock(&self.readers).len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads until the task ends, cannot be read, or nobody listens; then
/// leaves the table, so the next listen starts afresh.
async fn run<R, F>(
    readers: Readers,
    key: PollKey,
    tx: watch::Sender<Reading>,
    every: Duration,
    read: R,
) where
    R: Fn() -> F,
    F: Future<Output = Option<Value>>,
{
    loop {
        let reading = match read().await {
            Some(mut task) => {
                if let Some(members) = task.as_object_mut() {
                    members.remove("resultType");
                }
                Reading::Read(Arc::new(task))
            }
            None => Reading::Gone,
        };
        let last = reading.is_final();
        // Listeners only hear a change.
        tx.send_if_modified(|now| {
            let changed = *now != reading;
            *now = reading;
            changed
        });
        if last {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = tx.closed() => {
                // A listen may subscribe between the last one leaving and
                // this: decided under the table's lock, which subscribing
                // takes too.
                let mut table = lock(&readers);
                if tx.receiver_count() == 0 {
                    table.remove(&key);
                    return;
                }
            }
        }
    }
    let mut table = lock(&readers);
    if table.get(&key).is_some_and(|t| t.same_channel(&tx)) {
        table.remove(&key);
    }
}

#[cfg(test)]
mod tests;
