//! `[route.tasks]`: the `io.modelcontextprotocol/tasks` extension on a
//! route: gateway-made tasks for a legacy server, which has none, and a
//! native server's own tasks relayed. Only a route with this section offers
//! the extension; every other route neither offers it nor passes a client's
//! declaration of it on (`protocol::tasks`).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

/// `[route.tasks]`: when a call becomes a task, and the bounds of the table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TasksConfig {
    /// A call of a tool whose policy says `task = "optional"` that is still
    /// running (or asks a person) after this long becomes a task; unset: it
    /// becomes one at once. `task = "required"` tools are tasks at once.
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<super::schema::HumanDuration>")]
    pub after: Option<Duration>,
    /// How long a task lives from its creation (its `ttlMs`); a task still
    /// running then fails with a diagnostic and the server hears `cancel`.
    /// A native server's relayed task is honoured no longer than this.
    #[serde(default = "ttl", with = "humantime_serde")]
    #[schemars(with = "super::schema::HumanDuration")]
    pub ttl: Duration,
    /// The `pollIntervalMs` clients are asked to honour.
    #[serde(default = "poll_interval", with = "humantime_serde")]
    #[schemars(with = "super::schema::HumanDuration")]
    pub poll_interval: Duration,
    /// Tasks one principal may hold (or have relayed) on a replica at once.
    #[serde(default = "max_per_principal")]
    pub max_per_principal: usize,
    /// Tasks a replica holds at once, for all principals.
    #[serde(default = "max_total")]
    pub max_total: usize,
}

fn ttl() -> Duration {
    Duration::from_secs(3600)
}
fn poll_interval() -> Duration {
    Duration::from_secs(2)
}
fn max_per_principal() -> usize {
    16
}
fn max_total() -> usize {
    1024
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            after: None,
            ttl: ttl(),
            poll_interval: poll_interval(),
            max_per_principal: max_per_principal(),
            max_total: max_total(),
        }
    }
}

impl TasksConfig {
    /// What `redmark check` refuses in the section: each problem in a sentence.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.ttl.is_zero() {
            out.push("[route.tasks] ttl must be longer than 0s".to_owned());
        }
        if self.max_per_principal == 0 || self.max_total == 0 {
            out.push("[route.tasks] max_per_principal and max_total must be at least 1".to_owned());
        }
        if self.max_per_principal > self.max_total {
            out.push(format!(
                "[route.tasks] max_per_principal ({}) is larger than max_total ({})",
                self.max_per_principal, self.max_total
            ));
        }
        if let Some(after) = self.after
            && after >= self.ttl
        {
            out.push(format!(
                "[route.tasks] after ({}s) must be shorter than ttl ({}s): no call could become a task",
                after.as_secs(),
                self.ttl.as_secs()
            ));
        }
        if self.poll_interval >= self.ttl {
            out.push("[route.tasks] poll_interval must be shorter than ttl".to_owned());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_sound_and_contradictions_are_named() {
        assert!(TasksConfig::default().problems().is_empty());
        let bad = TasksConfig {
            after: Some(Duration::from_secs(10)),
            ttl: Duration::from_secs(5),
            poll_interval: Duration::from_secs(6),
            max_per_principal: 5,
            max_total: 2,
        };
        let problems = bad.problems().join("\n");
        assert!(
            problems.contains("after (10s) must be shorter than ttl"),
            "{problems}"
        );
        assert!(
            problems.contains("max_per_principal (5) is larger"),
            "{problems}"
        );
        assert!(problems.contains("poll_interval"), "{problems}");
        let parsed: TasksConfig = toml::from_str("after = \"30s\"\nttl = \"2h\"").unwrap();
        assert_eq!(parsed.after, Some(Duration::from_secs(30)));
        assert_eq!(parsed.ttl, Duration::from_secs(7200));
        assert!(toml::from_str::<TasksConfig>("afterr = \"1s\"").is_err());
    }
}
