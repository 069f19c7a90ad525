//! Tests of [`super`]: the audit writer (rotation, hashing, stdout, a full
//! queue) and the redundant rule.

use super::*;
use serde_json::json;
use std::sync::Mutex;

fn rec(principal: &str, n: usize) -> AuditRecord {
    AuditRecord {
        time: timestamp(SystemTime::now()),
        route: "rooms".into(),
        tool: "book_meeting_room".into(),
        principal: principal.into(),
        operation: format!("op-{n}"),
        key: "room".into(),
        method: Method::Elicitation,
        mode: Some(Mode::Form),
        fields: vec!["room_id".into()],
        outcome: Outcome::Accepted,
        answer_ms: Some(24_000),
        verdict: "ok".into(),
        redundant: false,
        redundant_fields: Vec::new(),
        repeated_fields: Vec::new(),
        default_offered: Vec::new(),
        default_kept: Vec::new(),
        narrowed: Vec::new(),
        trace_id: None,
        reask: false,
        rule: None,
        origin: None,
    }
}

fn lines(path: &Path) -> Vec<AuditRecord> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn rotates_by_size_and_keeps_the_newest_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let line = serde_json::to_vec(&rec("alice", 10)).unwrap().len() as u64 + 1;
    let mut cfg = AuditConfig::new(&path);
    cfg.max_bytes = Some(line * 3); // three lines a file
    cfg.keep = 2;
    let sink = AuditSink::start(&cfg).unwrap();
    for n in 0..13 {
        sink.record(rec("alice", n));
    }
    sink.close().await.unwrap();
    let ops = |p: &Path| {
        lines(p)
            .into_iter()
            .map(|r| r.operation)
            .collect::<Vec<_>>()
    };
    assert_eq!(ops(&path), ["op-12"]);
    assert_eq!(ops(&rotated(&path, 1)), ["op-9", "op-10", "op-11"]);
    assert_eq!(ops(&rotated(&path, 2)), ["op-6", "op-7", "op-8"]);
    assert!(!rotated(&path, 3).exists());
    assert_eq!((sink.dropped(), sink.write_errors()), (0, 0));
    // A restart appends and counts what is already there.
    let sink = AuditSink::start(&cfg).unwrap();
    sink.record(rec("alice", 13));
    sink.record(rec("alice", 14));
    sink.record(rec("alice", 15));
    sink.flush().await.unwrap();
    assert_eq!(ops(&path), ["op-15"]);
    assert_eq!(ops(&rotated(&path, 1)), ["op-12", "op-13", "op-14"]);
}

#[tokio::test]
async fn hashes_principals_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let mut cfg = AuditConfig::new(&path);
    cfg.hash_principals = true;
    let sink = AuditSink::start(&cfg).unwrap();
    sink.record(rec("alice", 0));
    sink.flush().await.unwrap();
    let got = lines(&path);
    assert_eq!(got[0].principal, hash_principal("alice"));
    assert!(got[0].principal.starts_with("sha256:") && got[0].principal.len() == 71);
    let text = fs::read_to_string(&path).unwrap();
    assert!(!text.contains("alice"), "{text}");
    assert!(text.contains(r#""mode":"form""#) && text.contains(r#""trace_id":null"#));
}

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);
impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn dash_means_stdout_one_line_per_record() {
    let cwd = std::env::current_dir().unwrap();
    let sink = AuditSink::start(&AuditConfig::new("-")).unwrap();
    sink.record(rec("alice", 0));
    sink.close().await.unwrap();
    assert!(!cwd.join("-").exists(), "\"-\" is stdout, not a file");
    // The stream path (what stdout goes through), captured.
    let buf = Buf::default();
    let sink = AuditSink::spawn(Box::new(buf.clone()), None, false, 8, None).unwrap();
    sink.record(rec("alice", 1));
    sink.record(rec("bob", 2));
    sink.flush().await.unwrap();
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let got: Vec<AuditRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ops: Vec<_> = got.iter().map(|r| (&*r.principal, &*r.operation)).collect();
    assert_eq!(ops, [("alice", "op-1"), ("bob", "op-2")]);
}

struct Stuck(std::sync::mpsc::Receiver<()>);
impl Write for Stuck {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let _ = self.0.recv();
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_instead_of_blocking() {
    let (release, stuck) = std::sync::mpsc::channel();
    let sink = AuditSink::spawn(Box::new(Stuck(stuck)), None, false, 1, None).unwrap();
    for n in 0..10 {
        sink.record(rec("alice", n));
    }
    assert!(sink.dropped() >= 8, "{}", sink.dropped());
    drop(release);
    sink.close().await.unwrap();
    sink.record(rec("alice", 11));
    assert!(sink.dropped() >= 9);
    AuditSink::disabled().record(rec("alice", 0));
    assert_eq!(AuditSink::disabled().dropped(), 0);
    assert!(AuditSink::disabled().flush().await.is_ok());
}

#[test]
fn redundant_when_every_accepted_value_was_already_in_the_arguments() {
    let args = json!({"location": "Mercury", "start": "14:00", "duration_minutes": 30,
                      "attendees": [{"name": "Ada"}]});
    let c = |v: Value| v.as_object().unwrap().clone();
    assert!(redundant(&args, &c(json!({"room_id": " mercury "}))));
    assert!(redundant(&args, &c(json!({"duration_minutes": 30}))));
    assert!(redundant(
        &args,
        &c(json!({"who": "ada", "start": "14:00"}))
    ));
    assert!(!redundant(&args, &c(json!({"room_id": "venus"}))));
    assert!(!redundant(
        &args,
        &c(json!({"room_id": "mercury", "floor": 3}))
    ));
    assert!(
        !redundant(&args, &c(json!({"minutes": 30}))),
        "numbers only by name"
    );
    assert!(!redundant(&args, &c(json!({"room_id": ""}))));
    assert!(
        !redundant(&args, &c(json!({}))),
        "a bare confirmation repeats nothing"
    );
    assert!(!redundant(
        &json!({"invite": "Stand-up in Mercury"}),
        &c(json!({"room": "Mercury"}))
    ));
    assert!(!redundant(&Value::Null, &c(json!({"room": "Mercury"}))));
}

#[test]
fn config_defaults_and_validation() {
    let cfg: AuditConfig = toml::from_str(r#"path = "/var/log/redmark/audit.jsonl""#).unwrap();
    assert_eq!(cfg, AuditConfig::new("/var/log/redmark/audit.jsonl"));
    assert_eq!(
        (cfg.keep, cfg.queue, cfg.max_bytes, cfg.hash_principals),
        (5, 4096, None, false)
    );
    assert!(toml::from_str::<AuditConfig>("path = \"-\"\ncolour = 1").is_err());
    assert!(
        AuditConfig {
            max_bytes: Some(0),
            ..cfg.clone()
        }
        .validate()
        .is_err()
    );
    assert!(
        AuditConfig {
            queue: 0,
            ..cfg.clone()
        }
        .validate()
        .is_err()
    );
    assert!(cfg.validate().is_ok());
}

/// docs/src/reference/audit.md's table of fields names every field a record
/// can carry (every optional one set here), and no other.
#[test]
fn every_field_of_a_record_is_documented() {
    let mut full = rec("alice", 1);
    full.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
    full.reask = true;
    full.rule = Some("maximum".into());
    full.origin = Some(Origin::Native);
    full.redundant_fields = vec!["room_id".into()];
    full.repeated_fields = vec!["room_id".into()];
    full.default_offered = vec!["room_id".into()];
    full.default_kept = vec!["room_id".into()];
    full.narrowed = vec!["room_id".into()];
    let serde_json::Value::Object(record) = serde_json::to_value(&full).unwrap() else {
        panic!("a record is a JSON object");
    };
    let written: std::collections::BTreeSet<&str> = record.keys().map(String::as_str).collect();
    let page = include_str!("../../docs/src/reference/audit.md");
    let fields = &page[page.find("## Fields").expect("a Fields section")..];
    let documented: std::collections::BTreeSet<&str> = fields
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    assert_eq!(
        documented, written,
        "docs/src/reference/audit.md vs a record"
    );
}
