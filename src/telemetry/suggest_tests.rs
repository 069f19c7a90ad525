//! Tests of [`super`]: each kind of suggestion on synthetic audit records,
//! at each threshold's edge (the minimum sample, the share), and the order.

use super::*;

fn q(tool: &str, op: usize, outcome: Outcome, ms: Option<u64>) -> Question {
    Question {
        time: "2026-01-01T00:00:00.000Z".into(),
        route: "r".into(),
        tool: tool.into(),
        outcome,
        answer_ms: ms,
        redundant: false,
        reask: false,
        origin: None,
        key: "room".into(),
        principal: "alice".into(),
        operation: format!("op-{op}"),
        fields: vec!["room_id".into()],
        redundant_fields: Vec::new(),
        repeated_fields: Vec::new(),
        verdict: "ok".into(),
        rule: None,
    }
}

/// `n` accepted answers of `room_id`, the first `hits` of them in the arguments.
fn redundant(n: usize, hits: usize) -> Vec<Question> {
    (0..n)
        .map(|i| {
            let mut q = q("book", i, Outcome::Accepted, Some(24_000));
            if i < hits {
                q.redundant = true;
                q.redundant_fields = vec!["room_id".into()];
            }
            q
        })
        .collect()
}

fn kinds(s: &[Suggestion]) -> Vec<Kind> {
    s.iter().map(|s| s.kind).collect()
}

#[test]
fn model_owned_needs_the_sample_and_the_share() {
    let t = Thresholds::default();
    // 20 answers, exactly half in the arguments: suggested, with its lines.
    let s = suggest(&redundant(20, 10), &t);
    assert_eq!(kinds(&s), [Kind::ModelOwned]);
    assert_eq!(s[0].field.as_deref(), Some("room_id"));
    assert_eq!(s[0].policy, ["[tool.book]", "model_owned = [\"room_id\"]"]);
    assert!(s[0].evidence.contains("10 of 20"), "{}", s[0].evidence);
    // Saved: the ten redundant answers at 24 s.
    assert!((s[0].hours_saved - 240.0 / 3600.0).abs() < 1e-9);
    // One short of the sample, or one short of the share: nothing.
    assert!(suggest(&redundant(19, 19), &t).is_empty());
    assert!(suggest(&redundant(20, 9), &t).is_empty());
    // Both thresholds are configurable.
    let loose = Thresholds {
        min_sample: 5,
        redundant_share: 0.4,
        ..t
    };
    assert_eq!(
        kinds(&suggest(&redundant(10, 4), &loose)),
        [Kind::ModelOwned]
    );
}

#[test]
fn a_field_whose_answers_were_the_persons_own_gets_no_model_owned() {
    // Every answer typed by the person (nothing in the arguments), repeated
    // from last time: `remember`, never `model_owned`.
    let qs: Vec<Question> = (0..20)
        .map(|i| {
            let mut q = q("invoice", i, Outcome::Accepted, Some(10_000));
            q.fields = vec!["currency".into()];
            q.repeated_fields = vec!["currency".into()];
            q
        })
        .collect();
    let s = suggest(&qs, &Thresholds::default());
    assert_eq!(kinds(&s), [Kind::Remember]);
    assert_eq!(
        s[0].policy,
        ["[tool.invoice.fields.currency]", "remember = \"30d\""]
    );
}

#[test]
fn remember_needs_the_share_of_repeated_answers() {
    let qs = |k: usize| -> Vec<Question> {
        (0..20)
            .map(|i| {
                let mut q = q("invoice", i, Outcome::Accepted, Some(10_000));
                if i < k {
                    q.repeated_fields = vec!["room_id".into()];
                }
                q
            })
            .collect()
    };
    assert_eq!(
        kinds(&suggest(&qs(10), &Thresholds::default())),
        [Kind::Remember]
    );
    assert!(suggest(&qs(9), &Thresholds::default()).is_empty());
}

#[test]
fn unanswered_questions_get_a_precise_error_and_approvals_the_host() {
    let lost = |tool: &str, fields: &[&str], n: usize, k: usize| -> Vec<Question> {
        (0..n)
            .map(|i| {
                let (o, ms) = if i < k {
                    (Outcome::Unanswered, None)
                } else {
                    (Outcome::Declined, Some(5_000))
                };
                let mut q = q(tool, i, o, ms);
                q.fields = fields.iter().map(|f| (*f).to_owned()).collect();
                q
            })
            .collect()
    };
    let t = Thresholds::default();
    let s = suggest(&lost("book", &["room_id"], 20, 5), &t);
    assert_eq!(kinds(&s), [Kind::PreciseError]);
    assert_eq!(s[0].policy, ["[tool.book]", "max_questions = 0"]);
    assert!(s[0].evidence.contains("5 of 20"), "{}", s[0].evidence);
    assert!(suggest(&lost("book", &["room_id"], 20, 4), &t).is_empty());
    assert!(suggest(&lost("book", &["room_id"], 19, 19), &t).is_empty());
    let s = suggest(&lost("delete", &["confirm"], 20, 10), &t);
    assert_eq!(kinds(&s), [Kind::HostConfirmation]);
    assert!(s[0].change.contains("destructiveHint"), "{}", s[0].change);
    // Refused questions reached nobody: they are not "unanswered".
    let refused: Vec<Question> = (0..30)
        .map(|i| q("book", i, Outcome::Refused, None))
        .collect();
    assert!(suggest(&refused, &t).is_empty());
}

#[test]
fn three_questions_per_operation_is_too_many() {
    let ops = |n: usize, many: usize| -> Vec<Question> {
        let mut qs = Vec::new();
        for op in 0..n {
            let asked = if op < many { 3 } else { 1 };
            for k in 0..asked {
                let mut q = q("migrate", op, Outcome::Declined, Some(1_000));
                q.key = format!("k{k}");
                qs.push(q);
            }
        }
        qs
    };
    let t = Thresholds::default();
    let s = suggest(&ops(20, 10), &t);
    assert_eq!(kinds(&s), [Kind::FewerPrompts]);
    assert_eq!(s[0].policy, ["[tool.migrate]", "max_questions = 2"]);
    // The third prompt of each of the ten operations: 10 s.
    assert!((s[0].hours_saved - 10.0 / 3600.0).abs() < 1e-9);
    assert!(suggest(&ops(20, 9), &t).is_empty());
    assert!(suggest(&ops(19, 19), &t).is_empty());
    let two = Thresholds { prompts: 2, ..t };
    assert_eq!(kinds(&suggest(&ops(20, 10), &two)), [Kind::FewerPrompts]);
}

#[test]
fn reasks_dominated_by_one_rule_mean_the_bound_is_not_shown() {
    let reasks = |n: usize, k: usize| -> Vec<Question> {
        (0..n)
            .map(|i| {
                let mut q = q("ticket", i, Outcome::Invalid, Some(8_000));
                q.reask = true;
                q.rule = Some(if i < k { "maximum" } else { "minimum" }.into());
                q
            })
            .collect()
    };
    let t = Thresholds::default();
    let s = suggest(&reasks(20, 10), &t);
    assert_eq!(kinds(&s), [Kind::ShowTheBound]);
    assert!(s[0].change.contains("`maximum`"), "{}", s[0].change);
    assert!(s[0].policy.is_empty());
    let strict = Thresholds {
        reask_share: 0.6,
        ..t
    };
    assert!(suggest(&reasks(20, 10), &strict).is_empty());
    assert!(suggest(&reasks(19, 19), &t).is_empty());
}

#[test]
fn suggestions_are_ordered_by_the_hours_they_save() {
    let mut qs = redundant(20, 20); // 20 x 24 s
    qs.extend((0..20).map(|i| {
        let mut q = q("invoice", 100 + i, Outcome::Accepted, Some(60_000));
        q.fields = vec!["currency".into()];
        q.repeated_fields = vec!["currency".into()];
        q
    })); // 20 x 60 s
    let s = suggest(&qs, &Thresholds::default());
    assert_eq!(kinds(&s), [Kind::Remember, Kind::ModelOwned]);
    assert!(s[0].hours_saved > s[1].hours_saved);
}

/// Every suggestion kind with a policy line, for `tool` and its `field`.
fn every_kind(tool: &str, field: &str) -> Vec<Question> {
    let mut qs = Vec::new();
    for i in 0..20 {
        // model_owned: every answer of `field` already in the arguments.
        let mut a = q(tool, i, Outcome::Accepted, Some(5_000));
        a.fields = vec![field.into()];
        a.redundant_fields = vec![field.into()];
        qs.push(a);
        // remember: every answer of `remembered` repeats the last one.
        let mut r = q(tool, i, Outcome::Accepted, Some(5_000));
        r.fields = vec![format!("{field}2")];
        r.repeated_fields = vec![format!("{field}2")];
        qs.push(r);
        // A precise error: question `lost` never answered; three per operation.
        let mut u = q(tool, i, Outcome::Unanswered, None);
        u.key = "lost".into();
        qs.push(u);
    }
    qs
}

#[test]
fn every_policy_line_parses_back_to_the_tool_and_field_it_names() {
    use crate::policy::{Defaults, Policy};
    use crate::telemetry::visible::{HOSTILE_NAMES, visible};
    let base = Defaults::default();
    let mut checked = 0;
    for tool in HOSTILE_NAMES {
        for field in HOSTILE_NAMES {
            let s = suggest(&every_kind(tool, field), &Thresholds::default());
            let got: BTreeSet<Kind> = s.iter().map(|s| s.kind).collect();
            let want = [
                Kind::ModelOwned,
                Kind::PreciseError,
                Kind::FewerPrompts,
                Kind::Remember,
            ];
            assert_eq!(got, want.into(), "{tool:?} / {field:?}");
            for s in &s {
                let text = s.policy.join("\n");
                let ctx = format!("{:?} for {tool:?} / {field:?}:\n{text}", s.kind);
                let p = Policy::parse(&text, "suggestion.toml")
                    .unwrap_or_else(|e| panic!("{ctx}\n{e}"));
                // Exactly the tool it names, and nothing else set.
                assert_eq!(p.tools.keys().collect::<Vec<_>>(), [tool], "{ctx}");
                assert_eq!(p.defaults.mode, base.mode, "{ctx}");
                assert_eq!(p.defaults.max_questions, base.max_questions, "{ctx}");
                let t = &p.tools[tool];
                match s.kind {
                    Kind::ModelOwned => {
                        assert_eq!(t.model_owned, [field.to_owned()].into(), "{ctx}");
                        assert!(t.fields.is_empty(), "{ctx}");
                    }
                    Kind::Remember => {
                        let f = format!("{field}2");
                        assert_eq!(t.fields.keys().collect::<Vec<_>>(), [&f], "{ctx}");
                        assert_eq!(
                            t.fields[&f].remember,
                            Some(std::time::Duration::from_secs(30 * 86_400)),
                            "{ctx}"
                        );
                    }
                    Kind::PreciseError => assert_eq!(t.max_questions, 0, "{ctx}"),
                    Kind::FewerPrompts => assert_eq!(t.max_questions, 2, "{ctx}"),
                    k => panic!("unexpected {k:?}: {ctx}"),
                }
                // Printable as they are: the text report shows them unchanged.
                for line in &s.policy {
                    assert_eq!(visible(line), line.as_str(), "{ctx}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, HOSTILE_NAMES.len() * HOSTILE_NAMES.len() * 4);
}
