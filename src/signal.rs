//! SIGHUP for the watchers that reload on it (policies, TLS certificates).
//!
//! [`Hangup::register`] installs the handler at once, in the caller, not when
//! a spawned task first runs: a SIGHUP that arrived in between would take its
//! default action and end the process (a logrotate `kill -HUP` must not).

/// A registered SIGHUP handler; where signals cannot be had, one that never fires.
pub struct Hangup {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangup {
    /// Registers the handler now; call it inside the runtime, before spawning.
    pub fn register() -> Hangup {
        Hangup {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok(),
        }
    }

    /// The next SIGHUP.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = self.signal.as_mut()
            && s.recv().await.is_some()
        {
            return;
        }
        std::future::pending::<()>().await;
    }
}
