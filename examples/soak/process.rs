//! The processes the soak runs: the gateway and the fast upstream (each
//! killed on drop), where their binaries are, the command line and
//! environment knobs, and the gateway's config.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A spawned process, killed and reaped when dropped (also on panic).
pub(crate) struct Proc {
    pub(crate) name: &'static str,
    pub(crate) child: Child,
    pub(crate) log: PathBuf,
}

impl Proc {
    /// Starts `cmd` with output to `<dir>/<name>.log`; waits for `ready` in it.
    pub(crate) fn start(
        name: &'static str,
        mut cmd: Command,
        dir: &Path,
        ready: &str,
    ) -> (Proc, String) {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = cmd.stdin(Stdio::null()).stdout(out).stderr(err).spawn();
        let child = child.unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let mut p = Proc { name, child, log };
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end {
            let text = std::fs::read_to_string(&p.log).unwrap_or_default();
            if text.contains(ready) {
                return (p, text);
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("{name} exited ({status}) before '{ready}':\n{text}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{name} did not say '{ready}' within 30 s");
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    /// SIGTERM, up to 5 s to exit, then SIGKILL.
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        eprintln!("[soak] stopped {} (pid {pid})", self.name);
    }
}

/// The text after `marker` in `text`, up to whitespace.
pub(crate) fn after<'a>(text: &'a str, marker: &str) -> &'a str {
    let rest = text.split(marker).nth(1).expect("marker in log");
    rest.split_whitespace().next().unwrap_or_default()
}

pub(crate) fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().unwrap_or(default))
}

/// The value after `--flag` on the command line.
pub(crate) fn flag(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

/// `--flag PATH`, else `NAME` beside this binary (`target/release/examples/soak`
/// has `../redmark`; the upstream example sits beside it).
pub(crate) fn binary(name: &str, rel: &str) -> PathBuf {
    if let Some(path) = flag(name) {
        return PathBuf::from(path);
    }
    let me = std::env::current_exe().expect("current exe");
    let dir = me.parent().expect("examples dir");
    dir.join(rel)
}

/// The gateway's config: one route to the fast upstream, a short TTL, room
/// for every question, idle sessions let go soon.
pub(crate) fn config(upstream_port: u16, ttl: Duration, questions: u64) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         [mrtr]\nttl = \"{ttl}ms\"\nmax_pending_per_principal = {pending}\n\
         [[route]]\nname = \"soak\"\npath = \"/mcp\"\n\
         [route.upstream]\nurl = \"http://127.0.0.1:{upstream_port}/mcp\"\n\
         [route.pool]\nmax_sessions = 1024\nmax_sessions_per_principal = 1024\n\
         idle_timeout = \"10s\"\n",
        ttl = ttl.as_millis(),
        pending = questions + 1000,
    )
}
