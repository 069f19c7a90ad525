//! The printed report: counts, errors, latencies and the gateway's samples
//! at start, peak and rest.

use std::time::Duration;

use crate::Soak;
use crate::load::Shared;
use crate::sample::{Sample, loadavg, pct};

/// Prints the report; returns the number of unexpected errors (a run
/// without a single successful request counts as one).
pub(crate) fn report(
    soak: &Soak,
    rounds: u64,
    tally: &Shared,
    sent: u64,
    (start, peak, ends): (&Sample, &Sample, &[(Sample, Duration)]),
) -> u64 {
    let mut guard = tally.lock().unwrap();
    let t = &mut *guard;
    for v in [&mut t.pass_lat_us, &mut t.open_lat_us, &mut t.retry_lat_us] {
        v.sort_unstable();
    }
    let mut errors: u64 = t.errors.values().map(|e| e.0).sum();
    if t.pass_lat_us.is_empty() || t.open_lat_us.is_empty() {
        errors += 1;
        t.errors
            .insert("no successful requests".into(), (1, String::new()));
    }
    let load = soak.secs.as_secs_f64() * rounds as f64;
    println!("## soak\n");
    println!(
        "{rounds} x {:.0} s of load ({sent} echo calls, {:.0}/s; {} questions, ttl {} s), seed {}, load average {}",
        soak.secs.as_secs_f64(),
        t.pass_lat_us.len() as f64 / load,
        soak.questions * rounds,
        soak.ttl.as_secs(),
        soak.seed,
        loadavg()
    );
    let list = |m: &mut dyn Iterator<Item = String>| m.collect::<Vec<_>>().join(", ");
    println!(
        "fates: {}",
        list(&mut t.fates.iter().map(|(k, v)| format!("{k} {v}")))
    );
    println!(
        "replies as designed: {} ok; designed endings: {}",
        t.ok,
        list(&mut t.designed.iter().map(|(k, v)| format!("`{k}` {v}")))
    );
    println!("errors: {errors}");
    for (kind, (n, first)) in &t.errors {
        println!("  {n} x {kind}: {first:.300}");
    }
    println!(
        "latency ms (p50 / p99): passthrough {:.2} / {:.2}; ask (first round) {:.2} / {:.2}; answer {:.2} / {:.2}",
        pct(&t.pass_lat_us, 50.0),
        pct(&t.pass_lat_us, 99.0),
        pct(&t.open_lat_us, 50.0),
        pct(&t.open_lat_us, 99.0),
        pct(&t.retry_lat_us, 50.0),
        pct(&t.retry_lat_us, 99.0),
    );
    let heads: Vec<String> = if ends.len() == 1 {
        vec!["end".into()]
    } else {
        (1..=ends.len())
            .map(|r| format!("after round {r}"))
            .collect()
    };
    println!(
        "\n| gateway | start | peak | {} |\n|---|---:|---:|{}",
        heads.join(" | "),
        "---:|".repeat(ends.len())
    );
    fn mib(k: u64) -> String {
        format!("{:.1}", k as f64 / 1024.0)
    }
    type Row = (&'static str, fn(&Sample) -> String);
    let rows: [Row; 14] = [
        ("RSS MiB", |s| mib(s.rss_kib)),
        ("RSS anonymous MiB", |s| mib(s.anon_kib)),
        ("RSS file MiB", |s| mib(s.file_kib)),
        ("jemalloc allocated MiB", |s| mib(s.allocated_kib)),
        ("jemalloc resident MiB", |s| mib(s.resident_kib)),
        ("jemalloc metadata MiB", |s| mib(s.metadata_kib)),
        ("threads", |s| s.threads.to_string()),
        ("open fds", |s| s.fds.to_string()),
        ("tokio tasks", |s| s.tasks.to_string()),
        ("pending operations", |s| s.pending.to_string()),
        ("operations on sessions", |s| s.session_ops.to_string()),
        ("sessions leased", |s| s.leased.to_string()),
        ("sessions idle", |s| s.idle.to_string()),
        ("client connections", |s| s.connections.to_string()),
    ];
    for (name, f) in rows {
        let after: Vec<String> = ends.iter().map(|(e, _)| f(e)).collect();
        println!(
            "| {name} | {} | {} | {} |",
            f(start),
            f(peak),
            after.join(" | ")
        );
    }
    errors
}
