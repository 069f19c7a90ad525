//! Reloading policies without a restart: on SIGHUP and when a policy file
//! changes on disk. A policy that fails to load leaves the previous one in
//! force (and says why); in-flight operations keep the policy they started with.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use super::Policy;
use crate::config::ConfigErrors;

/// Told the route and whether each reload worked (for metrics).
pub type OnReload = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// How often policy files are checked for changes.
const POLL: Duration = Duration::from_secs(1);

/// The policy of one route, swappable at run time.
pub struct PolicyHandle {
    path: Option<PathBuf>,
    current: RwLock<Arc<Policy>>,
    /// Modification time and length last loaded, to notice changes cheaply.
    seen: Mutex<Option<(SystemTime, u64)>>,
}

fn file_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl PolicyHandle {
    /// A route without a policy file: the defaults (spec-level guards only).
    pub fn fixed(policy: Policy) -> Arc<Self> {
        Arc::new(Self {
            path: None,
            current: RwLock::new(Arc::new(policy)),
            seen: Mutex::new(None),
        })
    }

    pub fn load(path: &Path) -> Result<Arc<Self>, ConfigErrors> {
        let seen = file_stamp(path);
        let policy = Policy::load(path)?;
        Ok(Arc::new(Self {
            path: Some(path.to_path_buf()),
            current: RwLock::new(Arc::new(policy)),
            seen: Mutex::new(seen),
        }))
    }

    /// The policy in force now.
    pub fn current(&self) -> Arc<Policy> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Loads the file again; on error the previous policy stays in force.
    pub fn reload(&self) -> Result<(), ConfigErrors> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let stamp = file_stamp(path);
        let policy = Policy::load(path)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(policy);
        *self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = stamp;
        Ok(())
    }

    /// True when the file on disk differs from what was last loaded (or tried).
    fn changed(&self) -> bool {
        let Some(path) = &self.path else { return false };
        let now = file_stamp(path);
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if now != *seen {
            // Remember what was seen so a broken file is reported once, not every second.
            *seen = now;
            return true;
        }
        false
    }
}

/// Outcome of one reload, for logs and metrics.
fn reload_logged(route: &str, handle: &PolicyHandle, why: &str, on_reload: &dyn Fn(&str, bool)) {
    match handle.reload() {
        Ok(()) => {
            tracing::info!(
                route,
                policy = handle.path().map(|p| p.display().to_string()).as_deref(),
                trigger = why,
                "policy reloaded"
            );
            on_reload(route, true);
        }
        Err(errors) => {
            tracing::error!(route, policy = handle.path().map(|p| p.display().to_string()).as_deref(), trigger = why, errors = %errors, "policy reload failed; the previous policy stays in force");
            on_reload(route, false);
        }
    }
}

/// Watches every route's policy until `stop` turns true. SIGHUP is always
/// handled here, even with no policy file: its default action ends the
/// process, and a logrotate `postrotate kill -HUP` must not take the gateway down.
pub fn watch(
    handles: Vec<(String, Arc<PolicyHandle>)>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    on_reload: OnReload,
) {
    let files = handles.iter().filter(|(_, h)| h.path().is_some()).count();
    let mut hup = crate::signal::Hangup::register();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = hup.recv() => {
                    if files == 0 {
                        tracing::info!("SIGHUP: no policy files to reload");
                    }
                    for (route, h) in handles.iter().filter(|(_, h)| h.path().is_some()) {
                        reload_logged(route, h, "SIGHUP", on_reload.as_ref());
                    }
                }
                _ = tick.tick(), if files > 0 => {
                    for (route, h) in &handles {
                        if h.changed() {
                            reload_logged(route, h, "file changed", on_reload.as_ref());
                        }
                    }
                }
                _ = stop.changed() => return,
            }
        }
    });
}
