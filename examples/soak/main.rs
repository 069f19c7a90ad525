//! Soak: redmark (release) under a steady mixed load against the fast
//! upstream (`examples/bench_upstream.rs`), then at rest, checked for errors
//! and leaks. Run it with `scripts/soak.sh` (which builds what it needs).
//!
//! For `SOAK_SECONDS` (60) it sends `SOAK_RATE` (1,000) passthrough
//! `tools/call echo` per second and opens `SOAK_QUESTIONS` (10,000) `ask`
//! operations spread evenly over the run. Each question meets a fate drawn
//! at random (seeded, `SOAK_SEED`): answered, declined, cancelled by the
//! person (`action: cancel`), left to expire (`[mrtr] ttl` = `SOAK_TTL_SECONDS`)
//! and then retried late, abandoned by a client that sends its answer and
//! closes the connection at once, or answered twice at the same moment (a
//! replayed state). Every reply is checked: a designed ending (the late
//! retry's `operation_expired`, the replay loser's `state_replayed`) is
//! counted by its `data.reason`; anything else is an error.
//!
//! Gateway RSS, open file descriptors, tokio tasks (`redmark_runtime_tasks`),
//! pending operations and upstream sessions are sampled at start (after a
//! warm-up), through the run (peak), and at the end: once every TTL and the
//! late-retry grace (60 s) have passed, it waits (up to `SOAK_SETTLE_SECONDS`,
//! 150) for the gateway to come back to rest. Exit status 1 on any error or
//! leak: pending operations or leased sessions left, live heap objects
//! (jemalloc's `allocated`) more than 10 % + 1 MiB over start, RSS more than
//! `SOAK_RSS_SLACK_PERCENT` (10) over start, more descriptors or tasks than
//! at start (plus a small slack). Live bytes are the leak measure; RSS is the
//! looser backstop, since it also holds the allocator's fragmented pages.
//!
//! With `--rounds N` (`SOAK_ROUNDS`) the load runs N times on the same
//! gateway, resting after each: RSS at rest that stays level from round to
//! round is capacity kept for the next burst; growth per round is a leak.
//! Each sample also splits RSS (anonymous, file-backed) and reads jemalloc's
//! own counters (`redmark_allocator_bytes`): live objects against pages held.
//!
//! Usage: `soak [--redmark BIN] [--upstream BIN] [--rounds N]` (default: beside this binary).

// An example may panic on what it cannot do: it is not on a request path.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]

mod load;
mod process;
mod report;
mod sample;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use load::{Fate, Question, Shared, client, mix, passthrough};
use process::{Proc, after, binary, config, env_num, flag};
use report::report;
use sample::{Sample, loadavg, sample};

/// redmark's `LATE_RETRY_GRACE`: how long an ended operation is remembered past its TTL.
const LATE_RETRY_GRACE: Duration = Duration::from_secs(60);
/// How far RSS at rest may sit above start.
const RSS_SLACK: f64 = 0.10;
/// How far live heap objects at rest (jemalloc's `allocated`) may sit above
/// start: the leak criterion proper. RSS also counts pages the allocator
/// keeps for fragmented slabs after a burst (a short run ends with a few MiB
/// of them, released only as the next load reuses them), live bytes do not.
const LIVE_SLACK: f64 = 0.10;
/// ... plus this much, KiB: start holds only a few MiB of live objects.
const LIVE_FLOOR_KIB: u64 = 1024;
/// Descriptors and tasks at rest may exceed start by this many (a timer, a log file).
const COUNT_SLACK: i64 = 4;

/// What one run is: the load, the gateway it goes to, and how it is judged.
struct Soak {
    secs: Duration,
    rate: u64,
    questions: u64,
    ttl: Duration,
    seed: u64,
    workers: u64,
    only: Option<Fate>,
    url: String,
    addr: String,
    admin: String,
    pid: u32,
    scrape: reqwest::Client,
}

impl Soak {
    async fn sample(&self) -> Sample {
        sample(&self.scrape, &self.admin, self.pid).await
    }

    /// Warm-up: the route learns its session mode, allocators and pools fill
    /// to their working size; then the clients close and the gateway rests.
    async fn warm_up(&self) {
        let warm: Shared = Arc::default();
        passthrough(
            self.url.clone(),
            500,
            Duration::from_secs(2),
            8,
            warm.clone(),
        )
        .await;
        let mut set = tokio::task::JoinSet::new();
        for i in 0..60 {
            let fate = [Fate::Answer, Fate::Decline, Fate::Cancel, Fate::Replay][i % 4];
            set.spawn(
                self.question(900_000_000 + i as u64, fate, 0.0, &warm)
                    .run(),
            );
        }
        while set.join_next().await.is_some() {}
        let w = warm.lock().unwrap();
        assert!(w.errors.is_empty(), "warm-up errors: {:?}", w.errors);
    }

    fn question(&self, id: u64, fate: Fate, think: f64, tally: &Shared) -> Question {
        Question {
            http: client(),
            url: self.url.clone(),
            addr: self.addr.clone(),
            id,
            fate,
            think,
            ttl: self.ttl,
            tally: tally.clone(),
        }
    }

    /// One round of load: passthrough and questions opened at an even pace,
    /// sampled into `peak`. Round `r` draws the same fates as round 0 under
    /// other ids, so rounds can be compared. Returns the echo calls sent.
    async fn round(&self, r: u64, tally: &Shared, peak: &Arc<Mutex<Sample>>) -> u64 {
        let running = Arc::new(AtomicBool::new(true));
        let began = Instant::now();
        let sampler = {
            let (running, peak, scrape, admin, pid) = (
                running.clone(),
                peak.clone(),
                self.scrape.clone(),
                self.admin.clone(),
                self.pid,
            );
            tokio::spawn(async move {
                let mut last_log = Instant::now();
                while running.load(Ordering::Relaxed) {
                    let s = sample(&scrape, &admin, pid).await;
                    let p = {
                        let mut p = peak.lock().unwrap();
                        *p = p.max(s);
                        *p
                    };
                    if last_log.elapsed() >= Duration::from_secs(5) {
                        last_log = Instant::now();
                        eprintln!(
                            "[soak] round {} t={:.0}s: {s} (peak rss {} KiB)",
                            r + 1,
                            began.elapsed().as_secs_f64(),
                            p.rss_kib
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        };
        let pass = tokio::spawn(passthrough(
            self.url.clone(),
            self.rate,
            self.secs,
            self.workers,
            tally.clone(),
        ));
        let http = client();
        let mut set = tokio::task::JoinSet::new();
        let period = self.secs.div_f64(self.questions.max(1) as f64);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        for i in 0..self.questions {
            tick.tick().await;
            let draw = mix(self.seed ^ mix(i));
            let fate = self.only.unwrap_or(Fate::draw(draw));
            let think = (draw >> 32) as f64 / f64::from(u32::MAX) * 0.8;
            let mut q = self.question(r * self.questions + i, fate, think, tally);
            q.http = http.clone();
            set.spawn(q.run());
        }
        let sent = pass.await.expect("passthrough");
        while set.join_next().await.is_some() {}
        running.store(false, Ordering::Relaxed);
        sampler.await.expect("sampler");
        sent
    }

    /// At rest: once every TTL of the round that began at `began` and the
    /// grace minute have passed, waits up to `settle` for `at_rest`. Returns
    /// the last sample and how long after the load it was taken.
    async fn rest(
        &self,
        began: Instant,
        settle: Duration,
        at_rest: impl Fn(&Sample) -> bool,
    ) -> (Sample, Duration) {
        let load_end = began + self.secs;
        let earliest = load_end + self.ttl + LATE_RETRY_GRACE + Duration::from_secs(6);
        let deadline = earliest.max(Instant::now()) + settle;
        eprintln!(
            "[soak] load done in {:.1}s; resting until every TTL and the grace minute passed ({:.0}s)",
            began.elapsed().as_secs_f64(),
            earliest
                .saturating_duration_since(Instant::now())
                .as_secs_f64()
        );
        let mut end = self.sample().await;
        let mut logged = Instant::now();
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_secs(1)).await;
            end = self.sample().await;
            if Instant::now() >= earliest && at_rest(&end) {
                break;
            }
            if logged.elapsed() >= Duration::from_secs(10) {
                logged = Instant::now();
                eprintln!(
                    "[soak] resting {:.0}s: {end}",
                    load_end.elapsed().as_secs_f64()
                );
            }
        }
        (end, load_end.elapsed())
    }
}

#[allow(clippy::too_many_lines)]
fn main() {
    let secs = Duration::from_secs(env_num("SOAK_SECONDS", 60).max(1));
    let questions = env_num("SOAK_QUESTIONS", 10_000);
    let default_ttl = (secs.as_secs() / 6).clamp(3, 30);
    let ttl = Duration::from_secs(env_num("SOAK_TTL_SECONDS", default_ttl).max(1));
    let settle = Duration::from_secs(env_num("SOAK_SETTLE_SECONDS", 150));
    // `--rounds N` (or SOAK_ROUNDS): the load N times on the same gateway, resting
    // after each: RSS that comes back to the same level is capacity, growth a leak.
    let rounds = flag("--rounds").map_or_else(
        || env_num("SOAK_ROUNDS", 1),
        |v| v.parse().expect("--rounds N"),
    );
    let rounds = rounds.clamp(1, 100);
    // SOAK_ONLY=answered|declined|cancelled|expired|abandoned|replayed: every question meets that fate.
    let only = std::env::var("SOAK_ONLY").ok().map(|name| {
        let all = [
            Fate::Answer,
            Fate::Decline,
            Fate::Cancel,
            Fate::Expire,
            Fate::Abandon,
            Fate::Replay,
        ];
        all.into_iter()
            .find(|f| f.name() == name)
            .unwrap_or_else(|| panic!("SOAK_ONLY={name}: not a fate"))
    });
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();

    let mut cmd = Command::new(binary("--upstream", "bench_upstream"));
    cmd.args(["--http", "0"]);
    let marker = "bench-upstream listening on port ";
    let (upstream, text) = Proc::start("bench-upstream", cmd, dir, marker);
    let up_port: u16 = after(&text, marker).parse().expect("upstream port");

    let file = dir.join("soak.toml");
    std::fs::write(&file, config(up_port, ttl, questions)).expect("write config");
    let redmark_bin = binary("--redmark", "../redmark");
    let mut cmd = Command::new(&redmark_bin);
    cmd.arg("serve").arg("--config").arg(&file);
    cmd.env(
        "RUST_LOG",
        std::env::var("RUST_LOG").unwrap_or("warn".into()),
    );
    let (gw, text) = Proc::start("redmark", cmd, dir, "redmark admin on http://");
    let addr = after(&text, "redmark listening on http://").to_owned();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let soak = Soak {
        secs,
        rate: env_num("SOAK_RATE", 1000),
        questions,
        ttl,
        seed: env_num("SOAK_SEED", 1),
        workers: env_num("SOAK_WORKERS", 32).clamp(1, 512),
        only,
        url: format!("http://{addr}/mcp"),
        admin: format!("http://{}", after(&text, "redmark admin on http://")),
        addr,
        pid: gw.pid(),
        scrape: rt.block_on(async { client() }),
    };
    eprintln!(
        "[soak] {}: {rounds} x {secs:?} of {} echo/s and {questions} questions, ttl {ttl:?}, seed {}, load average {}",
        redmark_bin.display(),
        soak.rate,
        soak.seed,
        loadavg()
    );

    rt.block_on(soak.warm_up());
    std::thread::sleep(Duration::from_secs(2));
    let start = rt.block_on(soak.sample());
    eprintln!("[soak] start: {start}");

    // `SOAK_RSS_SLACK_PERCENT` (default 10): CI's short run allows more, see `.ci/run`.
    let slack = env_num("SOAK_RSS_SLACK_PERCENT", (RSS_SLACK * 100.0) as u64) as f64 / 100.0;
    let rss_bound = (start.rss_kib as f64 * (1.0 + slack)) as u64;
    // Zero under `--features system-allocator` (no jemalloc counters): then RSS alone judges.
    let live_bound = (start.allocated_kib as f64 * (1.0 + LIVE_SLACK)) as u64 + LIVE_FLOOR_KIB;
    let at_rest = |s: &Sample| {
        s.pending == 0
            && s.session_ops == 0
            && s.leased == 0
            && s.allocated_kib <= live_bound
            && s.rss_kib <= rss_bound
            && s.fds <= start.fds + COUNT_SLACK
            && s.tasks <= start.tasks + COUNT_SLACK
    };
    let tally: Shared = Arc::default();
    let peak = Arc::new(Mutex::new(start));
    let mut sent = 0;
    let mut ends = Vec::new();
    for r in 0..rounds {
        let began = Instant::now();
        sent += rt.block_on(soak.round(r, &tally, &peak));
        let (end, after_load) = rt.block_on(soak.rest(began, settle, at_rest));
        eprintln!(
            "[soak] after round {} ({:.0}s after its load): {end}",
            r + 1,
            after_load.as_secs_f64()
        );
        ends.push((end, after_load));
    }
    let peak = *peak.lock().unwrap();
    let gw_log = std::fs::metadata(&gw.log).map_or(0, |m| m.len());
    let gw_lines = std::fs::read_to_string(&gw.log).map_or(0, |t| t.lines().count());
    drop(rt);

    let (end, after_load) = *ends.last().expect("one round at least");
    let errors = report(&soak, rounds, &tally, sent, (&start, &peak, &ends));
    println!(
        "\nend sampled {:.0} s after the load stopped; gateway log: {gw_lines} lines, {gw_log} bytes",
        after_load.as_secs_f64()
    );

    let mut failed = Vec::new();
    if errors > 0 {
        failed.push(format!("{errors} unexpected errors"));
    }
    if !at_rest(&end) {
        failed.push(format!(
            "not back at rest {:.0} s after the load: {end} (start {start}, bounds: live {live_bound} KiB, RSS {rss_bound} KiB)",
            after_load.as_secs_f64()
        ));
    }
    drop(gw);
    drop(upstream);
    if failed.is_empty() {
        println!("\nsoak: ok");
    } else {
        println!("\nsoak: FAILED: {}", failed.join("; "));
        std::process::exit(1);
    }
}
