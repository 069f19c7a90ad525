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

/// Reads a policy file again; the outcome is logged and told `on_reload` (metrics).
pub fn reload_logged(
    route: &str,
    handle: &PolicyHandle,
    why: &str,
    on_reload: &dyn Fn(&str, bool),
) {
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

/// Route names and their policies, as watched.
pub type Watched = Vec<(String, Arc<PolicyHandle>)>;

/// The one watcher of the routes' policies: which files it watches is
/// replaced by a config reload, so routes that are gone are not watched (nor
/// kept alive) any longer, and no reload adds a watcher.
#[derive(Clone)]
pub struct PolicyWatch {
    handles: Arc<RwLock<Watched>>,
    /// False once a config reload owns SIGHUP (it reads every policy again itself).
    on_hup: Arc<std::sync::atomic::AtomicBool>,
}

impl PolicyWatch {
    /// Watches these from now on, in place of the routes watched before.
    pub fn replace(&self, handles: Watched) {
        *self
            .handles
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = handles;
    }

    /// SIGHUP reloads the whole config file, policies included: reading the
    /// policies here too would do it twice.
    pub fn leave_sighup_to_config_reload(&self) {
        self.on_hup
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    fn handles(&self) -> Watched {
        self.handles
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Watches every route's policy until `stop` turns true. SIGHUP is always
/// handled here, even with no policy file: its default action ends the
/// process, and a logrotate `postrotate kill -HUP` must not take the gateway down.
pub fn watch(
    handles: Watched,
    mut stop: tokio::sync::watch::Receiver<bool>,
    on_reload: OnReload,
) -> PolicyWatch {
    let watch = PolicyWatch {
        handles: Arc::new(RwLock::new(handles)),
        on_hup: Arc::new(std::sync::atomic::AtomicBool::new(true)),
    };
    let watching = watch.clone();
    let mut hup = crate::signal::Hangup::register();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = hup.recv() => {
                    if !watching.on_hup.load(std::sync::atomic::Ordering::Relaxed) {
                        continue;
                    }
                    let handles = watching.handles();
                    let mut files = handles.iter().filter(|(_, h)| h.path().is_some()).peekable();
                    if files.peek().is_none() {
                        tracing::info!("SIGHUP: no policy files to reload");
                    }
                    for (route, h) in files {
                        reload_logged(route, h, "SIGHUP", on_reload.as_ref());
                    }
                }
                _ = tick.tick() => {
                    for (route, h) in &watching.handles() {
                        if h.changed() {
                            reload_logged(route, h, "file changed", on_reload.as_ref());
                        }
                    }
                }
                _ = stop.changed() => return,
            }
        }
    });
    watch
}
