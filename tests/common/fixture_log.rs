//! Waiting for things, and what fixture servers write down.
//!
//! `eventually` is the one bounded wait of the tests: every "until X" goes
//! through it, with a deadline and a panic that names what was awaited and
//! what was last seen. `FixtureLog` reads the JSON-lines log that the fixture
//! servers (tests/fixtures/*.py) append to the file named by `FIXTURE_LOG`;
//! `Fixture` is such a server's private directory and log. Each area's
//! support module adds the gateway config for its own server in an
//! `impl Fixture` block.

use std::fmt::Display;
use std::future::{Future, ready};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::toml_path;

/// How long any bounded wait may take unless a test says otherwise.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `probe` until it gives `Ok`, within [`PATIENCE`]. Panics naming
/// `what` and the last `Err` (what was seen instead).
pub async fn eventually<T, S, F>(what: &str, probe: impl FnMut() -> F) -> T
where
    F: Future<Output = Result<T, S>>,
    S: Display,
{
    eventually_within(what, PATIENCE, probe).await
}

/// [`eventually`] with its own deadline. Polls often at first, then every 100 ms.
pub async fn eventually_within<T, S, F>(
    what: &str,
    within: Duration,
    mut probe: impl FnMut() -> F,
) -> T
where
    F: Future<Output = Result<T, S>>,
    S: Display,
{
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = Duration::from_millis(5);
    loop {
        match probe().await {
            Ok(found) => return found,
            Err(seen) if tokio::time::Instant::now() >= deadline => {
                panic!("waited {within:?} for {what}; last seen: {seen}")
            }
            Err(_) => {}
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// The JSON-lines event log a fixture server writes.
#[derive(Debug, Clone)]
pub struct FixtureLog {
    pub path: PathBuf,
}

impl FixtureLog {
    pub fn new(path: impl Into<PathBuf>) -> FixtureLog {
        FixtureLog { path: path.into() }
    }

    /// Every complete line of the log so far.
    pub fn events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Events `event` of one call (`tag`), in order.
    pub fn tagged(&self, event: &str, tag: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == event && e["tag"] == tag)
            .collect()
    }

    /// What the server was answered in call `tag`, in order.
    pub fn answers(&self, tag: &str) -> Vec<Value> {
        self.tagged("answer", tag)
    }

    /// The log as it is now, one event a line, for a failure message.
    pub fn seen(&self) -> String {
        let events: Vec<String> = self.events().iter().map(Value::to_string).collect();
        format!(
            "{} event(s) in {}:\n{}",
            events.len(),
            self.path.display(),
            events.join("\n")
        )
    }

    /// Waits for an event matching `pred` and returns the first one.
    pub async fn eventually(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let what = format!("the fixture to log {what}");
        eventually(&what, || {
            let found = self.events().into_iter().find(|e| pred(e));
            ready(found.ok_or_else(|| self.seen()))
        })
        .await
    }

    /// Waits until call `tag` has at least `n` answers and returns them.
    pub async fn answers_at_least(&self, tag: &str, n: usize) -> Vec<Value> {
        let what = format!("the fixture to log {n} answer(s) for {tag}");
        eventually(&what, || {
            let found = self.answers(tag);
            ready(if found.len() >= n {
                Ok(found)
            } else {
                Err(self.seen())
            })
        })
        .await
    }

    /// Waits for the answer the server received in call `tag` (the first one).
    pub async fn answer(&self, tag: &str) -> Value {
        self.answers_at_least(tag, 1).await.swap_remove(0)
    }

    /// Waits for the answer of call `tag` and asserts it was the only one.
    pub async fn only_answer(&self, tag: &str) -> Value {
        let mut got = self.answers_at_least(tag, 1).await;
        assert_eq!(got.len(), 1, "call {tag}: {got:?}");
        got.swap_remove(0)
    }
}

/// A fixture server's private directory, with its log (`fixture.jsonl`) and
/// the route's policy file (`policy.toml`) in it.
pub struct Fixture {
    dir: tempfile::TempDir,
    pub log: FixtureLog,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = FixtureLog::new(dir.path().join("fixture.jsonl"));
        Fixture { dir, log }
    }

    /// A path in this fixture's private directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The `env = { FIXTURE_LOG = ... }` key of a `[route.upstream]` table.
    pub fn log_env(&self) -> String {
        format!("env = {{ FIXTURE_LOG = {} }}", toml_path(&self.log.path))
    }

    pub fn policy_path(&self) -> PathBuf {
        self.path("policy.toml")
    }

    /// Replaces the policy file in one step (write aside, then rename), so a
    /// gateway never reads a half-written file.
    pub fn write_policy(&self, text: &str) {
        let aside = self.path("policy.toml.new");
        std::fs::write(&aside, text).expect("write policy");
        std::fs::rename(&aside, self.policy_path()).expect("rename policy");
    }

    /// Writes the policy file and returns the route's `policy = ...` key.
    pub fn policy(&self, text: &str) -> String {
        self.write_policy(text);
        format!("policy = {}", toml_path(&self.policy_path()))
    }
}
