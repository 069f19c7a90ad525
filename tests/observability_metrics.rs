//! The admin listener's `/metrics` after real operations in front of the
//! rooms example: parsed with an OpenMetrics parser (families, types, label
//! names, values), scraped by a real Prometheus, and checked against every
//! metric the Grafana dashboard (examples/grafana/redmark.json) queries.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod observability_support;

use std::collections::{BTreeMap, BTreeSet};
use std::future::ready;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{
    PATIENCE, TestGateway, eventually, eventually_within, listening_ports, repo, rooms_bin,
    toml_str,
};
use observability_support::{accept, client, tool_call};
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};
use regex::Regex;
use serde_json::{Value, json};

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

const LEASED: &str = r#"redmark_upstream_sessions{route="rooms",state="leased"}"#;

/// The rooms example behind one route `rooms` with policies/rooms.toml.
fn rooms_with_policy() -> String {
    let policy = repo().join("policies/rooms.toml");
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[[route]]\nname = \"rooms\"\npath = \"/mcp\"\npolicy = {}\n[route.upstream]\ncommand = [{}]\n",
        toml_str(policy.to_str().unwrap()),
        toml_str(rooms_bin().to_str().unwrap())
    )
}

fn parse(text: &str) -> Exposition {
    openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("/metrics is not valid OpenMetrics ({e:?}):\n{text}"))
}

async fn scrape(gw: &TestGateway) -> Exposition {
    parse(&gw.metrics().await)
}

fn ticket(prefix: &str) -> common::Op {
    tool_call(
        "create_ticket",
        json!({"title": "metrics scenario"}),
        prefix,
    )
}

/// Two operations: 9 (re-asked) then 3, completed in two rounds; and 9 three
/// times, ended by policy_invalid_answer in three. In between, while the first
/// waits for its answer, one operation is pending.
async fn scenario(gw: &TestGateway) {
    let client = client(gw.url.clone());
    let op = ticket("ok");
    let asked = op.start(&client).await;
    let pending = scrape(gw).await;
    assert_eq!(gauge(&pending, "redmark_pending_operations", &[]), 1.0);
    // Hold mode: the operation keeps its upstream session leased between rounds.
    let leased = [("route", "rooms"), ("state", "leased")];
    assert_eq!(gauge(&pending, "redmark_upstream_sessions", &leased), 1.0);
    let priorities = [9, 3];
    let resps = op
        .walk_on(&client, asked, 2, |round, q| {
            accept(q, "priority", json!({"priority": priorities[round - 1]}))
        })
        .await;
    assert_eq!(resps[2].result()["structuredContent"]["priority"], 3);

    let resps = ticket("bad")
        .walk(&client, 3, |_, q| {
            accept(q, "priority", json!({"priority": 9}))
        })
        .await;
    assert_eq!(resps[3].reason(), "policy_invalid_answer");
    // The client hears the ending before it is counted; the lease goes back
    // after that: once nothing is leased, every metric of both is recorded.
    gw.wait_metric(LEASED, 0.0).await;
}

fn family<'a>(
    e: &'a Exposition,
    name: &str,
) -> &'a openmetrics_parser::MetricFamily<OpenMetricsType, OpenMetricsValue> {
    e.families
        .get(name)
        .unwrap_or_else(|| panic!("no family {name} in {:?}", e.families.keys()))
}

/// The sample of `name` whose labels are exactly `labels` (in any order).
fn sample<'a>(
    e: &'a Exposition,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<&'a OpenMetricsValue> {
    let want: BTreeMap<&str, &str> = labels.iter().copied().collect();
    family(e, name).iter_samples().find_map(|s| {
        let set = s.get_labelset().ok()?;
        let got: BTreeMap<&str, &str> = set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        (got == want).then_some(&s.value)
    })
}

fn gauge(e: &Exposition, name: &str, labels: &[(&str, &str)]) -> f64 {
    match sample(e, name, labels) {
        Some(OpenMetricsValue::Gauge(n)) => n.as_f64(),
        other => panic!("{name}{labels:?} is not a gauge sample: {other:?}"),
    }
}

fn counter(e: &Exposition, name: &str, labels: &[(&str, &str)]) -> f64 {
    match sample(e, name, labels) {
        Some(OpenMetricsValue::Counter(c)) => c.value.as_f64(),
        other => panic!("{name}{labels:?} is not a counter sample: {other:?}"),
    }
}

/// `(count, sum)` of a histogram sample.
fn histogram(e: &Exposition, name: &str, labels: &[(&str, &str)]) -> (u64, f64) {
    match sample(e, name, labels) {
        Some(OpenMetricsValue::Histogram(h)) => {
            assert!(
                h.buckets.iter().any(|b| b.upper_bound == f64::INFINITY),
                "{name} has no +Inf bucket"
            );
            (
                h.count.unwrap_or_default(),
                h.sum.map(|s| s.as_f64()).unwrap_or_default(),
            )
        }
        other => panic!("{name}{labels:?} is not a histogram sample: {other:?}"),
    }
}

/// Each family of the issue with its type and label names.
const FAMILIES: [(&str, OpenMetricsType, &[&str]); 8] = [
    (
        "redmark_operations",
        OpenMetricsType::Counter,
        &["route", "tool", "outcome"],
    ),
    (
        "redmark_rounds",
        OpenMetricsType::Histogram,
        &["route", "tool"],
    ),
    (
        "redmark_answer_seconds",
        OpenMetricsType::Histogram,
        &["route", "tool"],
    ),
    ("redmark_pending_operations", OpenMetricsType::Gauge, &[]),
    (
        "redmark_upstream_sessions",
        OpenMetricsType::Gauge,
        &["route", "state"],
    ),
    (
        "redmark_policy_rejections",
        OpenMetricsType::Counter,
        &["route", "tool", "reason"],
    ),
    (
        "redmark_request_duration_seconds",
        OpenMetricsType::Histogram,
        &["route", "method"],
    ),
    (
        "redmark_requests",
        OpenMetricsType::Counter,
        &["route", "method", "outcome"],
    ),
];

#[tokio::test]
async fn every_family_has_its_type_labels_and_values_after_a_round_trip() {
    let gw = TestGateway::start(&rooms_with_policy()).await;
    scenario(&gw).await;
    let m = scrape(&gw).await;

    for (name, kind, labels) in FAMILIES {
        let f = family(&m, name);
        assert_eq!(f.family_type, kind, "type of {name}");
        let got: BTreeSet<&str> = f.get_label_names().iter().map(String::as_str).collect();
        let want: BTreeSet<&str> = labels.iter().copied().collect();
        assert_eq!(got, want, "label names of {name}");
        assert!(f.iter_samples().count() > 0, "{name} has no sample");
    }

    let t = [("route", "rooms"), ("tool", "create_ticket")];
    let with = |extra: (&'static str, &'static str)| {
        let mut v = t.to_vec();
        v.push(extra);
        v
    };
    assert_eq!(
        counter(&m, "redmark_operations", &with(("outcome", "completed"))),
        1.0
    );
    assert_eq!(
        counter(
            &m,
            "redmark_operations",
            &with(("outcome", "policy_invalid_answer"))
        ),
        1.0
    );
    // Rounds: 2 (9 re-asked, 3 accepted) and 3 (9, 9, 9).
    assert_eq!(histogram(&m, "redmark_rounds", &t), (2, 5.0));
    // Only accepted answers are timed: the 3.
    let (answered, seconds) = histogram(&m, "redmark_answer_seconds", &t);
    assert_eq!(answered, 1);
    assert!((0.0..30.0).contains(&seconds), "{seconds}");
    assert_eq!(gauge(&m, "redmark_pending_operations", &[]), 0.0);
    // Three red-marked re-asks (one, then two) and the ending itself.
    assert_eq!(
        counter(
            &m,
            "redmark_policy_rejections",
            &with(("reason", "policy_invalid_answer"))
        ),
        4.0
    );
    let idle = [("route", "rooms"), ("state", "idle")];
    assert!(gauge(&m, "redmark_upstream_sessions", &idle) >= 0.0);
    // Seven POSTs: 3 for the first operation, 4 for the second.
    let call = [("route", "rooms"), ("method", "tools/call")];
    assert_eq!(
        histogram(&m, "redmark_request_duration_seconds", &call).0,
        7
    );
    gw.stop().await;
}

/// Every `expr` string anywhere in the dashboard, and the template queries.
fn dashboard_queries() -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr" | "definition", Value::String(s)) => out.push(s.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let path = repo().join("examples/grafana/redmark.json");
    let text = std::fs::read_to_string(&path).expect("examples/grafana/redmark.json");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut out = Vec::new();
    walk(&dashboard, &mut out);
    out
}

/// The family a series name in PromQL refers to, given the exposition: a
/// counter's `_total`, a histogram's `_bucket` / `_sum` / `_count`, a gauge
/// by its own name. (A bare histogram name is no series Prometheus stores.)
fn family_of<'a>(m: &'a Exposition, series: &str) -> Option<&'a str> {
    let lookup = |base: &str, kind: OpenMetricsType| {
        m.families
            .get_key_value(base)
            .filter(|(_, f)| f.family_type == kind)
            .map(|(k, _)| k.as_str())
    };
    let strip = |suffix: &str| series.strip_suffix(suffix);
    strip("_total")
        .and_then(|b| lookup(b, OpenMetricsType::Counter))
        .or_else(|| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| strip(s).and_then(|b| lookup(b, OpenMetricsType::Histogram)))
        })
        .or_else(|| lookup(series, OpenMetricsType::Gauge))
}

#[tokio::test]
async fn every_metric_the_grafana_dashboard_queries_exists() {
    let gw = TestGateway::start(&rooms_with_policy()).await;
    scenario(&gw).await;
    let m = scrape(&gw).await;
    gw.stop().await;

    let names = Regex::new(r"\bredmark_[a-zA-Z0-9_]+").unwrap();
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:#?}");
    let mut used = BTreeSet::new();
    for q in &queries {
        let found: Vec<&str> = names.find_iter(q).map(|x| x.as_str()).collect();
        assert!(!found.is_empty(), "a query without a redmark metric: {q}");
        used.extend(found);
    }
    let mut families = BTreeSet::new();
    for series in &used {
        let f = family_of(&m, series).unwrap_or_else(|| {
            panic!("the dashboard queries {series}, which /metrics does not serve")
        });
        assert!(
            family(&m, f).iter_samples().count() > 0,
            "{series}: no sample after the scenario"
        );
        families.insert(f);
    }
    // What the dashboard is for: outcomes, answer time, pending, rejections.
    for f in [
        "redmark_operations",
        "redmark_answer_seconds",
        "redmark_pending_operations",
        "redmark_policy_rejections",
    ] {
        assert!(families.contains(f), "the dashboard does not show {f}");
    }
    assert!(
        queries.iter().any(
            |q| q.contains("histogram_quantile") && q.contains("redmark_answer_seconds_bucket")
        ),
        "no answer-time quantile"
    );
    assert!(
        queries
            .iter()
            .any(|q| q.contains(r#"outcome="operation_expired""#) && q.contains(" / ")),
        "no unanswered rate"
    );
}

/// A Prometheus HTTP API query; `None` until it answers.
async fn prom_query(http: &reqwest::Client, base: &str, query: &str) -> Option<Value> {
    let mut url = url::Url::parse(&format!("{base}/api/v1/query")).unwrap();
    url.query_pairs_mut().append_pair("query", query);
    let resp = http
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    resp.json().await.ok()
}

/// `{outcome: value}` of `redmark_operations_total` as Prometheus has it.
fn by_outcome(answer: &Value) -> BTreeMap<String, String> {
    answer["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["metric"]["outcome"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["value"][1].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The Prometheus that scripts/setup-test-deps.sh unpacked from the Debian
/// package under .cache/ (unpacked, not installed, so no system service runs
/// for it); one on PATH where that could not be downloaded.
fn prometheus_bin() -> std::path::PathBuf {
    let unpacked = common::repo().join(".cache/prometheus/usr/bin/prometheus");
    if unpacked.exists() {
        unpacked
    } else {
        "prometheus".into()
    }
}

/// A real Prometheus scraping `admin` every second, its data and log in
/// `dir`; returns it with the base URL of its HTTP API (on a port of its own
/// choosing, read from /proc).
async fn start_prometheus(dir: &Path, admin: &str) -> (tokio::process::Child, String) {
    let target = admin.trim_start_matches("http://");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: redmark\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: [\"{target}\"]\n"
        ),
    )
    .unwrap();
    let log = dir.join("prometheus.log");
    let prometheus = tokio::process::Command::new(prometheus_bin())
        .arg(format!("--config.file={}", config.display()))
        .arg("--web.listen-address=127.0.0.1:0")
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus (scripts/setup-test-deps.sh unpacks it under .cache/prometheus)");
    let pid = prometheus.id().expect("prometheus runs");
    let port = eventually("Prometheus to listen", || {
        let ports = listening_ports(pid);
        ready(match ports[..] {
            [port] => Ok(port),
            _ => Err(std::fs::read_to_string(&log).unwrap_or_default()),
        })
    })
    .await;
    (prometheus, format!("http://127.0.0.1:{port}"))
}

#[tokio::test]
async fn a_real_prometheus_scrapes_the_admin_listener() {
    common::ensure_deps();
    let gw = TestGateway::start(&rooms_with_policy()).await;
    scenario(&gw).await;

    let dir = tempfile::tempdir().unwrap();
    let (mut prometheus, base) = start_prometheus(dir.path(), &gw.admin).await;
    let log_text =
        || std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    let http = reqwest::Client::new();
    let want = BTreeMap::from([
        ("completed".to_owned(), "1".to_owned()),
        ("policy_invalid_answer".to_owned(), "1".to_owned()),
    ]);
    let what = format!("Prometheus to have scraped {want:?}");
    let answer = eventually_within(&what, PATIENCE * 2, || async {
        match prom_query(&http, &base, "redmark_operations_total").await {
            Some(answer) if by_outcome(&answer) == want => Ok(answer),
            Some(answer) => Err(format!("{answer}\n{}", log_text())),
            None => Err(format!("no answer\n{}", log_text())),
        }
    })
    .await;
    for r in answer["data"]["result"].as_array().unwrap() {
        assert_eq!(r["metric"]["route"], "rooms", "{r}");
        assert_eq!(r["metric"]["tool"], "create_ticket", "{r}");
        assert_eq!(r["metric"]["job"], "redmark", "{r}");
    }

    // The rest of the families arrived in the same scrape.
    for (query, value) in [
        (r#"up{job="redmark"}"#, "1"),
        ("sum(redmark_policy_rejections_total)", "4"),
        ("sum(redmark_rounds_count)", "2"),
        ("sum(redmark_rounds_sum)", "5"),
        ("sum(redmark_answer_seconds_count)", "1"),
        ("redmark_pending_operations", "0"),
        (
            r#"sum(redmark_request_duration_seconds_count{method="tools/call"})"#,
            "7",
        ),
        (r#"count(redmark_upstream_sessions{route="rooms"})"#, "2"),
    ] {
        let got = prom_query(&http, &base, query)
            .await
            .expect("Prometheus answers");
        assert_eq!(
            got["data"]["result"][0]["value"][1], value,
            "{query}: {got}"
        );
    }

    // Every dashboard query is PromQL that Prometheus accepts.
    for q in dashboard_queries()
        .iter()
        .filter(|q| !q.starts_with("label_values("))
    {
        let promql = q
            .replace("$__rate_interval", "1m")
            .replace("$__range", "1h")
            .replace("$route", ".*");
        let got = prom_query(&http, &base, &promql)
            .await
            .expect("Prometheus answers");
        assert_eq!(got["status"], "success", "{promql}: {got}");
    }

    prometheus.start_kill().unwrap();
    let _ = tokio::time::timeout(PATIENCE, prometheus.wait()).await;
    gw.stop().await;
}
