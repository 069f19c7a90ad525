//! The metrics' unit tests: what a scrape renders (requests, sessions,
//! runtime tasks, allocator stats), the method label, and the cap on tool labels.

use super::*;

#[test]
fn renders_requests_and_sessions() {
    let m = Metrics::new();
    m.record_request("rooms", "tools/list", "ok", "2026", 0.01);
    m.record_request("rooms", "tools/list", "ok", "2025", 0.01);
    m.record_request("rooms", "initialize", "ok", "2025", 0.01);
    m.session_gauges("rooms").set(2, 1, 3);
    m.client_sessions().set(4);
    let text = m.render();
    // The client's era is its own family: the requests' labels are as they were.
    for sample in [
        r#"redmark_client_era_requests_total{route="rooms",era="2026"} 1"#,
        r#"redmark_client_era_requests_total{route="rooms",era="2025"} 2"#,
        r#"redmark_client_sessions 4"#,
    ] {
        assert!(text.contains(sample), "{sample} in {text}");
    }
    assert!(
        text.contains(
            r#"redmark_requests_total{route="rooms",method="tools/list",outcome="ok"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"redmark_upstream_sessions{route="rooms",state="idle"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"redmark_upstream_sessions{route="rooms",state="leased"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"redmark_upstream_session_operations{route="rooms"} 3"#),
        "{text}"
    );
}

#[test]
fn a_method_label_is_a_known_method_or_other() {
    assert_eq!(method_label(Some("tools/call")), "tools/call");
    assert_eq!(
        method_label(Some("notifications/cancelled")),
        "notifications/cancelled"
    );
    assert_eq!(method_label(None), "-");
    // 2025-era clients' messages are labelled by name (a fixed set).
    assert_eq!(method_label(Some("initialize")), "initialize");
    assert_eq!(method_label(Some("response")), "response");
    // The tasks extension's methods are methods now; 2025-11-25's are not.
    assert_eq!(method_label(Some("tasks/get")), "tasks/get");
    for sent in ["tools/Call", "tasks/list", "x".repeat(300).as_str(), ""] {
        assert_eq!(method_label(Some(sent)), "other", "{sent}");
    }
}

/// Tool names come from clients: however many a client sends, the
/// family stops growing at its cap and counts the rest as `_other`.
#[test]
fn tool_labelled_families_stop_growing_at_their_cap() {
    let m = Metrics::new();
    let over = MAX_TOOL_SERIES + 50;
    for i in 0..over {
        m.record_operation("r", &format!("tool-{i}"), "completed");
    }
    m.record_operation("r", "tool-0", "completed");
    let text = m.render();
    let series = text
        .lines()
        .filter(|l| l.starts_with("redmark_operations_total{"))
        .count();
    assert_eq!(
        series,
        MAX_TOOL_SERIES + 1,
        "the cap and the overflow member"
    );
    assert!(
        text.contains(
            r#"redmark_operations_total{route="r",tool="_other",outcome="completed"} 50"#
        ),
        "the calls past the cap are counted, under _other"
    );
    assert!(
        text.contains(r#"redmark_operations_total{route="r",tool="tool-0",outcome="completed"} 2"#),
        "a member made before the cap keeps counting"
    );
}

/// The soak (examples/soak/) reads the task count at rest to find leaks.
#[tokio::test]
async fn renders_the_runtime_tasks_alive_at_the_scrape() {
    let m = Metrics::new();
    let idle = tokio::spawn(std::future::pending::<()>());
    let text = m.render();
    let alive: i64 = text
        .lines()
        .find_map(|l| l.strip_prefix("redmark_runtime_tasks "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no redmark_runtime_tasks in {text}"));
    assert!(alive >= 1, "{text}");
    idle.abort();
}

/// The soak tells live objects from pages the allocator keeps by these.
#[test]
fn renders_the_allocator_stats_by_kind() {
    let m = Metrics::new();
    m.set_allocator(AllocatorStats {
        allocated: 1,
        active: 2,
        resident: 3,
        retained: 4,
        metadata: 5,
    });
    let text = m.render();
    for (kind, n) in [
        ("allocated", 1),
        ("active", 2),
        ("resident", 3),
        ("retained", 4),
        ("metadata", 5),
    ] {
        let line = format!("redmark_allocator_bytes{{kind=\"{kind}\"}} {n}");
        assert!(text.contains(&line), "{line} in {text}");
    }
}

/// Issue 42: the label values a client chooses are bounded in length as
/// well as in number, so a scrape is bounded whatever clients send. More
/// distinct long values than the cap go through every tool-labelled
/// family; no label is longer than `MAX_LABEL_BYTES` and the scrape stays
/// within (cap + 1) members times what one member renders.
#[test]
fn long_and_many_tool_labels_keep_the_scrape_bounded() {
    use crate::telemetry::labelled::MAX_LABEL_BYTES;
    let record = |m: &Metrics, tool: &str| {
        m.record_operation("r", tool, "completed");
        m.record_policy_rejection("r", tool, "policy_denied");
        m.record_rounds("r", tool, 2);
        m.record_replay_round("r", tool);
        m.record_answer("r", tool, 1.5);
    };
    // What one member of each family renders, with a label at the bound.
    let one = Metrics::new();
    let base = one.render().len();
    record(&one, &"t".repeat(4096));
    let per_member = one.render().len() - base;
    assert!(per_member < 16 * 1024, "{per_member}");

    let m = Metrics::new();
    let filler = "u".repeat(1024);
    for i in 0..MAX_TOOL_SERIES + 100 {
        record(&m, &format!("file:///{i}/{filler}"));
    }
    let text = m.render();
    let bound = base + (MAX_TOOL_SERIES + 1) * per_member;
    assert!(
        text.len() <= bound,
        "scrape {} bytes over its bound {bound}",
        text.len()
    );
    // Unshaped, the values alone would have been 5 x 10 MiB.
    assert!(text.len() < 64 * 1024 * 1024);
    for line in text.lines().filter(|l| l.contains("tool=\"")) {
        let value = line
            .split("tool=\"")
            .nth(1)
            .and_then(|v| v.split('"').next())
            .unwrap();
        assert!(value.len() <= MAX_LABEL_BYTES, "{line}");
    }
    assert!(
        text.contains(
            r#"redmark_operations_total{route="r",tool="_other",outcome="completed"} 100"#
        ),
        "past the cap, counted under _other"
    );
}

/// One sample in every family, through the fields themselves: a family
/// with no member renders nothing, not even its `# TYPE` line.
fn every_family_touched() -> Metrics {
    let m = Metrics::new();
    let s = |v: &str| v.to_owned();
    let tool = ToolLabels {
        route: s("r"),
        tool: s("t"),
    };
    let route = RouteLabels { route: s("r") };
    m.requests
        .get_or_create(&RequestLabels {
            route: s("r"),
            method: s("m"),
            outcome: s("o"),
        })
        .inc();
    m.duration
        .get_or_create(&MethodLabels {
            route: s("r"),
            method: s("m"),
        })
        .observe(0.1);
    m.sessions
        .get_or_create(&SessionLabels {
            route: s("r"),
            state: s("idle"),
        })
        .set(1);
    m.session_ops.get_or_create(&route).set(1);
    m.session_mode
        .get_or_create(&ModeLabels {
            route: s("r"),
            mode: s("learning"),
        })
        .set(1);
    m.upstream_protocol
        .get_or_create(&ProtocolLabels {
            route: s("r"),
            protocol: s("legacy"),
        })
        .set(1);
    m.operations
        .get_or_create(&OperationLabels {
            route: s("r"),
            tool: s("t"),
            outcome: s("completed"),
        })
        .inc();
    m.questions
        .get_or_create(&OperationLabels {
            route: s("r"),
            tool: s("t"),
            outcome: s("accepted"),
        })
        .inc();
    m.task_ends
        .get_or_create(&OperationLabels {
            route: s("r"),
            tool: s("t"),
            outcome: s("completed"),
        })
        .inc();
    m.live_tasks.set(1);
    m.reloads
        .get_or_create(&ReloadLabels {
            route: s("r"),
            result: s("ok"),
        })
        .inc();
    m.rejections
        .get_or_create(&RejectionLabels {
            route: s("r"),
            tool: s("t"),
            reason: s("x"),
        })
        .inc();
    m.rounds.get_or_create(&tool).observe(1.0);
    m.answers.get_or_create(&tool).observe(1.0);
    m.dropped.get_or_create(&route).inc();
    m.cluster
        .forwards
        .get_or_create(&ForwardLabels {
            route: s("r"),
            outcome: s("forwarded"),
        })
        .inc();
    m.cluster.received.get_or_create(&route).inc();
    m.rate_limited
        .get_or_create(&LimitLabels {
            route: s("r"),
            scope: s("tool"),
        })
        .inc();
    m.replay_rounds.get_or_create(&tool).inc();
    m.eras
        .get_or_create(&labels::EraLabels {
            route: s("r"),
            era: s("2026"),
        })
        .inc();
    m.allocator
        .get_or_create(&AllocatorLabels {
            kind: s("allocated"),
        })
        .set(1);
    m
}

/// The label names of `family`'s first sample in `text` (a histogram's
/// `_count` line, so without `le`).
fn sample_labels(text: &str, family: &str, kind: &str) -> Option<Vec<String>> {
    let name = if kind == "histogram" {
        format!("{family}_count")
    } else {
        family.to_owned()
    };
    let line = text.lines().find(|l| {
        l.strip_prefix(name.as_str())
            .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
    })?;
    let rest = &line[name.len()..];
    let Some(inner) = rest.strip_prefix('{') else {
        return Some(Vec::new());
    };
    let inner = &inner[..inner.find('}')?];
    Some(
        inner
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, _)| k.to_owned())
            .collect(),
    )
}

/// docs/src/reference/metrics.md lists every family registered in
/// families.rs, with its type and labels as a scrape renders them, and
/// nothing else: a family added without a row (or a row left for a family
/// removed, or a label changed) fails here.
#[test]
fn every_family_is_documented_with_its_type() {
    let page = include_str!("../../../docs/src/reference/metrics.md");
    // (name as queried, type, labels)
    let documented: Vec<(String, String, Vec<String>)> = page
        .lines()
        .filter(|l| l.starts_with("| `redmark_"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let labels = cells[3]
                .split(',')
                .map(|c| c.trim().trim_matches('`').to_owned())
                .filter(|c| !c.is_empty())
                .collect();
            (
                cells[1].trim_matches('`').to_owned(),
                cells[2].to_owned(),
                labels,
            )
        })
        .collect();

    // Every family registered, by the name families.rs gives it.
    let registered: std::collections::BTreeSet<String> = include_str!("families.rs")
        .split("registry.register(")
        .skip(1)
        .filter_map(|call| {
            let start = call.find('"')? + 1;
            let len = call[start..].find('"')?;
            Some(format!("redmark_{}", &call[start..start + len]))
        })
        .collect();
    let base = |name: &str, kind: &str| {
        if kind == "counter" {
            name.strip_suffix("_total").unwrap_or(name).to_owned()
        } else {
            name.to_owned()
        }
    };
    let listed: std::collections::BTreeSet<String> =
        documented.iter().map(|(n, k, _)| base(n, k)).collect();
    assert!(registered.len() > 20, "{registered:?}");
    assert_eq!(
        listed, registered,
        "docs/src/reference/metrics.md vs families.rs"
    );
    assert_eq!(listed.len(), documented.len(), "a family listed twice");

    // Each one's type and labels, as a scrape renders them.
    let text = every_family_touched().render();
    let mut problems = Vec::new();
    for (name, kind, labels) in &documented {
        let family = base(name, kind);
        if !text.contains(&format!("# TYPE {family} {kind}\n")) {
            problems.push(format!("{name}: not rendered as a {kind}"));
        }
        match sample_labels(&text, name, kind) {
            Some(rendered) if &rendered == labels => {}
            rendered => problems.push(format!("{name}: labels {labels:?}, rendered {rendered:?}")),
        }
    }
    assert!(problems.is_empty(), "{problems:#?}\n{text}");
}
