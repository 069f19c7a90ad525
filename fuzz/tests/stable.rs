//! The fuzz targets on stable, without libFuzzer: every committed corpus
//! input, then mutated and random inputs until a time bound, each through the
//! very same target function `cargo fuzz` runs. No coverage feedback, so it
//! finds less than libFuzzer; it never skips a target.
//!
//! ```text
//! cargo test --no-default-features --test stable -- [TARGET...] [--seconds N]
//!     [--timeout S] [--rss-limit-mb M] [--seed N]
//! cargo test --no-default-features --test stable -- --replay TARGET FILE...
//! ```
//!
//! (`scripts/fuzz.sh` runs it with `FUZZ_PATH=stable`, or when there is no
//! nightly.) A debug build, with overflow checks as under cargo-fuzz, that
//! reuses the dependencies the root's tests built in `target/`; everything
//! runs on a thread with a tokio worker's 2 MiB stack.
//!
//! A panic, an input slower than `--timeout` or a process above
//! `--rss-limit-mb` fails the run, and the input is written to
//! `fuzz/artifacts/TARGET/{crash,timeout,oom}-HASH` (as libFuzzer does).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redmark_fuzz::TARGETS;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Options {
    targets: Vec<String>,
    seconds: u64,
    timeout: Duration,
    rss_limit_mb: u64,
    seed: u64,
    replay: Option<(String, Vec<PathBuf>)>,
}

fn options() -> Options {
    let mut args = std::env::args().skip(1);
    let mut o = Options {
        targets: Vec::new(),
        seconds: 30,
        timeout: Duration::from_secs(10),
        rss_limit_mb: 2048,
        seed: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1,
        replay: None,
    };
    let number = |v: Option<String>, what: &str| -> u64 {
        v.and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{what} needs a number"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => o.seconds = number(args.next(), "--seconds"),
            "--timeout" => o.timeout = Duration::from_secs(number(args.next(), "--timeout")),
            "--rss-limit-mb" => o.rss_limit_mb = number(args.next(), "--rss-limit-mb"),
            "--seed" => o.seed = number(args.next(), "--seed") | 1,
            "--replay" => {
                let target = args.next().expect("--replay TARGET FILE...");
                o.replay = Some((target, args.by_ref().map(PathBuf::from).collect()));
            }
            // What cargo's test runner passes along.
            "--nocapture" | "--quiet" | "-q" | "--test-threads=1" => {}
            name if !name.starts_with('-') => o.targets.push(name.to_owned()),
            other => panic!("unknown option {other}"),
        }
    }
    if o.targets.is_empty() {
        o.targets = TARGETS.iter().map(|(n, _)| (*n).to_owned()).collect();
    }
    o
}

fn target(name: &str) -> fn(&[u8]) {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap_or_else(|| panic!("no target `{name}`; there are {:?}", names()))
}

fn names() -> Vec<&'static str> {
    TARGETS.iter().map(|(n, _)| *n).collect()
}

fn files(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// libFuzzer's dictionary format: one `"token"` per line, `\xNN` and `\"` escapes.
fn dictionary(name: &str) -> Vec<Vec<u8>> {
    let dict = match name {
        "request" | "guard" | "answer" | "framing" | "request_state" => "json",
        "sse" => "sse",
        _ => "toml",
    };
    let text = std::fs::read_to_string(fuzz_dir().join(format!("dict/{dict}.dict"))).unwrap();
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let body = l.strip_prefix('"')?.strip_suffix('"')?;
            let mut out = Vec::new();
            let mut bytes = body.bytes();
            while let Some(b) = bytes.next() {
                if b != b'\\' {
                    out.push(b);
                    continue;
                }
                match bytes.next() {
                    Some(b'x') => {
                        let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                        out.push(
                            u8::from_str_radix(std::str::from_utf8(&hex).unwrap(), 16).unwrap(),
                        );
                    }
                    Some(c) => out.push(c),
                    None => {}
                }
            }
            Some(out)
        })
        .collect()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: &[u8] = b"\0\x01\x7f\x80\xff\n\r\t \"'\\{}[]:,.=?-+0123456789eE";

/// One to eight of libFuzzer's kinds of mutation, on a copy of `base`.
fn mutate(rng: &mut Rng, base: &[u8], corpus: &[Vec<u8>], dict: &[Vec<u8>]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(8) {
        let at = rng.below(v.len() + 1);
        match rng.below(9) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            3 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(end)..end);
            }
            4 if !v.is_empty() => {
                let start = rng.below(v.len());
                let end = (start + 1 + rng.below(64)).min(v.len());
                let piece = v[start..end].to_vec();
                for _ in 0..1 + rng.below(4) {
                    v.splice(at..at, piece.iter().copied());
                }
            }
            5 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                let to = (from + rng.below(256)).min(other.len());
                v.splice(at..at, other[from..to].iter().copied());
            }
            6 | 7 if !dict.is_empty() => {
                let token = &dict[rng.below(dict.len())];
                v.splice(at..at, token.iter().copied());
            }
            _ => v.truncate(at),
        }
    }
    v.truncate(64 * 1024);
    v
}

fn rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096 / (1024 * 1024))
}

fn artifact(target: &str, kind: &str, input: &[u8]) -> PathBuf {
    let mut h = DefaultHasher::new();
    input.hash(&mut h);
    let dir = fuzz_dir().join("artifacts").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{kind}-{:016x}", h.finish()));
    std::fs::write(&path, input).unwrap();
    path
}

type Current = Arc<Mutex<Option<(&'static str, Instant, Vec<u8>)>>>;

/// libFuzzer's `-timeout` and `-rss_limit_mb`: a thread that ends the
/// process, keeping the input, when one input runs too long or memory grows too large.
fn watchdog(current: Current, timeout: Duration, rss_limit_mb: u64) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let guard = current.lock().unwrap();
            let Some((name, started, input)) = guard.as_ref() else {
                continue;
            };
            let kind = if started.elapsed() > timeout {
                "timeout"
            } else if rss_mb() > rss_limit_mb {
                "oom"
            } else {
                continue;
            };
            let path = artifact(name, kind, input);
            eprintln!(
                "\n==> FAIL {name}: {kind} (input ran {:.1} s, rss {} MB); input saved as {}",
                started.elapsed().as_secs_f64(),
                rss_mb(),
                path.display()
            );
            std::process::exit(70);
        }
    });
}

/// Runs one input; a panic fails the run with the input saved.
fn run(name: &'static str, f: fn(&[u8]), input: &[u8], current: &Current) {
    *current.lock().unwrap() = Some((name, Instant::now(), input.to_vec()));
    let outcome = catch_unwind(AssertUnwindSafe(|| f(input)));
    *current.lock().unwrap() = None;
    if outcome.is_err() {
        let path = artifact(name, "crash", input);
        eprintln!(
            "\n==> FAIL {name}: panic (message above); input saved as {}\n    replay: FUZZ_PATH=stable scripts/fuzz.sh --reproduce {name} {}",
            path.display(),
            path.display()
        );
        std::process::exit(1);
    }
}

fn main() {
    // The stack of a tokio worker (2 MiB), where the gateway runs these parsers.
    let worker = std::thread::Builder::new()
        .name("fuzz".into())
        .stack_size(2 << 20)
        .spawn(fuzz)
        .unwrap();
    if worker.join().is_err() {
        std::process::exit(1);
    }
}

fn fuzz() {
    let o = options();
    let current: Current = Arc::new(Mutex::new(None));
    watchdog(current.clone(), o.timeout, o.rss_limit_mb);
    if let Some((name, paths)) = &o.replay {
        let f = target(name);
        let name: &'static str = names().into_iter().find(|n| n == name).unwrap();
        for p in paths {
            run(name, f, &std::fs::read(p).unwrap(), &current);
            println!("{name}: {} ran without a finding", p.display());
        }
        return;
    }
    let mut rng = Rng(o.seed);
    println!(
        "stable fallback (no libFuzzer): targets {:?}, {} s each, seed {} (--seed to repeat)",
        o.targets, o.seconds, o.seed
    );
    for requested in &o.targets {
        let f = target(requested);
        let name: &'static str = names().into_iter().find(|n| n == requested).unwrap();
        let corpus = files(&fuzz_dir().join("corpus").join(name));
        assert!(!corpus.is_empty(), "{name}: the corpus is empty");
        let dict = dictionary(name);
        let started = Instant::now();
        for input in &corpus {
            run(name, f, input, &current);
        }
        let budget = Duration::from_secs(o.seconds);
        let mut execs = 0u64;
        while started.elapsed() < budget {
            for _ in 0..64 {
                let input = if rng.below(10) == 0 {
                    let n = rng.below(512);
                    (0..n).map(|_| rng.next() as u8).collect()
                } else {
                    let base = &corpus[rng.below(corpus.len())];
                    mutate(&mut rng, base, &corpus, &dict)
                };
                run(name, f, &input, &current);
                execs += 1;
            }
        }
        println!(
            "{name}: {} corpus inputs + {execs} mutated/random inputs in {:.1} s, no finding",
            corpus.len(),
            started.elapsed().as_secs_f64()
        );
    }
}
