//! What the gateway process holds: one sample from `/proc` and its
//! `/metrics`, plus the host's load average and the latency percentiles.

/// One look at the gateway: from `/proc` and its `/metrics`.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Sample {
    pub(crate) rss_kib: u64,
    /// RSS split: anonymous memory (heap, stacks) and file-backed pages (the binary's code).
    pub(crate) anon_kib: u64,
    pub(crate) file_kib: u64,
    pub(crate) threads: u64,
    /// jemalloc's counters (`redmark_allocator_bytes`), KiB: live objects, resident pages, metadata.
    pub(crate) allocated_kib: u64,
    pub(crate) resident_kib: u64,
    pub(crate) metadata_kib: u64,
    pub(crate) fds: i64,
    pub(crate) tasks: i64,
    pub(crate) pending: i64,
    pub(crate) session_ops: i64,
    pub(crate) leased: i64,
    pub(crate) idle: i64,
    pub(crate) connections: i64,
}

impl Sample {
    pub(crate) fn max(self, o: Sample) -> Sample {
        Sample {
            rss_kib: self.rss_kib.max(o.rss_kib),
            anon_kib: self.anon_kib.max(o.anon_kib),
            file_kib: self.file_kib.max(o.file_kib),
            threads: self.threads.max(o.threads),
            allocated_kib: self.allocated_kib.max(o.allocated_kib),
            resident_kib: self.resident_kib.max(o.resident_kib),
            metadata_kib: self.metadata_kib.max(o.metadata_kib),
            fds: self.fds.max(o.fds),
            tasks: self.tasks.max(o.tasks),
            pending: self.pending.max(o.pending),
            session_ops: self.session_ops.max(o.session_ops),
            leased: self.leased.max(o.leased),
            idle: self.idle.max(o.idle),
            connections: self.connections.max(o.connections),
        }
    }
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |k: u64| k as f64 / 1024.0;
        write!(
            f,
            "rss {:.1} MiB (anon {:.1}, file {:.1}), jemalloc allocated {:.1} resident {:.1} metadata {:.1}; \
             threads {}, fds {}, tasks {}, pending {}, session ops {}, leased {}, idle {}, connections {}",
            mib(self.rss_kib),
            mib(self.anon_kib),
            mib(self.file_kib),
            mib(self.allocated_kib),
            mib(self.resident_kib),
            mib(self.metadata_kib),
            self.threads,
            self.fds,
            self.tasks,
            self.pending,
            self.session_ops,
            self.leased,
            self.idle,
            self.connections
        )
    }
}

/// `field` of `/proc/<pid>/status` (`VmRSS`, `RssAnon`, `Threads`): its number.
fn status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn fds(pid: u32) -> i64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(-1, |d| d.count() as i64)
}

/// The sum of every series of `name` (with or without labels) in a text exposition.
fn metric(text: &str, name: &str, label: Option<&str>) -> i64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter(|l| label.is_none_or(|lb| l.contains(lb)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as i64
}

pub(crate) async fn sample(http: &reqwest::Client, admin: &str, pid: u32) -> Sample {
    let text = match http.get(format!("{admin}/metrics")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let alloc = |kind: &str| {
        let label = format!("kind=\"{kind}\"");
        (metric(&text, "redmark_allocator_bytes", Some(&label)) / 1024) as u64
    };
    Sample {
        rss_kib: status(pid, "VmRSS"),
        anon_kib: status(pid, "RssAnon"),
        file_kib: status(pid, "RssFile"),
        threads: status(pid, "Threads"),
        allocated_kib: alloc("allocated"),
        resident_kib: alloc("resident"),
        metadata_kib: alloc("metadata"),
        fds: fds(pid),
        tasks: metric(&text, "redmark_runtime_tasks", None),
        pending: metric(&text, "redmark_pending_operations", None),
        session_ops: metric(&text, "redmark_upstream_session_operations", None),
        leased: metric(&text, "redmark_upstream_sessions", Some("state=\"leased\"")),
        idle: metric(&text, "redmark_upstream_sessions", Some("state=\"idle\"")),
        connections: metric(&text, "redmark_client_connections", None),
    }
}

/// Nearest-rank percentile in milliseconds.
pub(crate) fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
