//! The check that no answered or argument value reached an exported span,
//! attribute or event: user data stays out of traces.

use regex::Regex;
use serde_json::Value;

use super::SpanRec;

/// Attributes whose numeric values are counts, times or code locations, never answers.
const NUMERIC_OK: [&str; 11] = [
    "redmark.round",
    "redmark.rounds",
    "redmark.answer_ms",
    "round",
    "rounds",
    "elapsed_ms",
    "thread.id",
    "code.lineno",
    "code.line.number",
    "busy_ns",
    "idle_ns",
];

/// Panics if any exported name, attribute or event value holds one of
/// `needles` or, outside [`NUMERIC_OK`], one of the answered `numbers`.
pub fn assert_no_leak(spans: &[SpanRec], needles: &[&str], numbers: &[i64]) {
    let standalone: Vec<(i64, Regex)> = numbers
        .iter()
        .map(|n| {
            (
                *n,
                Regex::new(&format!(r"(^|[^\w.]){n}([^\w.]|$)")).unwrap(),
            )
        })
        .collect();
    let mut checked = 0;
    for span in spans {
        for (place, key, value) in span.all_values() {
            checked += 1;
            let text = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            for needle in needles {
                assert!(
                    !text.contains(needle) && !key.contains(needle),
                    "{needle:?} leaked into {place}: {key} = {value}"
                );
            }
            for (n, re) in &standalone {
                let leaked = match &value {
                    Value::Number(v) => v.as_f64() == Some(*n as f64),
                    Value::String(s) => re.is_match(s),
                    other => re.is_match(&other.to_string()),
                };
                assert!(
                    !leaked || NUMERIC_OK.contains(&key.as_str()),
                    "answered value {n} leaked into {place}: {key} = {value}"
                );
            }
        }
    }
    assert!(
        checked > 20,
        "too little exported to prove anything: {checked}"
    );
}
