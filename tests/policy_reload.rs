//! Reloading a route's policy without a restart (issue 4): an edited file is
//! picked up by polling, a broken one leaves the previous policy in force and
//! counts a failed reload, and operations in flight keep the policy they
//! started with. Reloads are awaited through `redmark_policy_reloads_total`.

// A test may panic (that is how it fails) and cast freely.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;
mod policy_support;

use common::*;
use policy_support::*;
use serde_json::{Value, json};

fn transfer_max(max: u32) -> String {
    format!("# maximum {max}\n[tool.transfer.fields.amount]\nminimum = 0\nmaximum = {max}\n")
}

fn accept(amount: u32) -> Value {
    json!({"action": "accept", "content": {"amount": amount}})
}

/// Runs one `transfer` answering `amount`: `Ok` with what the server received,
/// or `Err` with the red mark of the re-ask (the re-ask is then cancelled).
async fn transfer(fx: &Fixture, gw: &TestGateway, tag: &str, amount: u32) -> Result<Value, String> {
    let call = tool("transfer", json!({"tag": tag}));
    let q = asked(&call.start(gw).await);
    let r = call.answer(gw, &q, accept(amount)).await;
    if r.result()["resultType"] == "complete" {
        output(&r);
        return Ok(received(&fx.log.only_answer(tag).await));
    }
    let again = asked(&r);
    let mark = again.message().to_owned();
    let out = output(&call.answer(gw, &again, json!({"action": "cancel"})).await);
    assert_eq!(out["action"], "cancel");
    Err(mark)
}

#[tokio::test]
async fn an_edited_policy_is_picked_up_without_a_restart() {
    let fx = Fixture::with_policy(&transfer_max(100));
    let gw = fx.gateway().await;
    let mark = transfer(&fx, &gw, "before", 150).await.unwrap_err();
    assert!(
        mark.contains("amount must be at most 100; 150 was given"),
        "{mark}"
    );

    fx.write_policy(&transfer_max(1000));
    gw.wait_metric(&reloads("ok"), 1.0).await;
    assert_eq!(
        transfer(&fx, &gw, "after", 150).await,
        Ok(accept(150)),
        "the new maximum is in force"
    );
    let mark = transfer(&fx, &gw, "after-2", 1500).await.unwrap_err();
    assert!(mark.contains("at most 1000; 1500 was given"), "{mark}");
    assert_eq!(gw.metric(&reloads("failed")).await.unwrap_or(0.0), 0.0);
    gw.stop().await;
}

#[tokio::test]
async fn a_broken_policy_keeps_the_previous_one_in_force() {
    let fx = Fixture::with_policy(&transfer_max(100));
    let gw = fx.gateway().await;
    for (i, broken) in [
        "[tool.transfer.fields.amount]\nminimum = 0\nmaximun = 1000\n",
        "[tool.transfer.fields.amount]\nminimum = 1000\nmaximum = 10\n",
        "[tool.transfer.fields.amount]\nauthz = 'value <'\n",
        "[tool.transfer.fields.amount\n",
    ]
    .into_iter()
    .enumerate()
    {
        fx.write_policy(broken);
        gw.wait_metric(&reloads("failed"), (i + 1) as f64).await;
        // Behaviour unchanged: the old maximum still holds, in both directions.
        let tag = format!("broken-{i}");
        let mark = transfer(&fx, &gw, &tag, 150).await.unwrap_err();
        assert!(
            mark.contains("at most 100; 150 was given"),
            "{broken}: {mark}"
        );
        assert_eq!(
            transfer(&fx, &gw, &format!("{tag}-ok"), 50).await,
            Ok(accept(50))
        );
    }
    // A policy file that disappears is a failed reload too.
    std::fs::remove_file(fx.policy_path()).unwrap();
    gw.wait_metric(&reloads("failed"), 5.0).await;
    let mark = transfer(&fx, &gw, "removed", 150).await.unwrap_err();
    assert!(mark.contains("at most 100; 150 was given"), "{mark}");
    assert_eq!(gw.metric(&reloads("ok")).await.unwrap_or(0.0), 0.0);
    // Fixed: the fixed file is loaded.
    fx.write_policy(&transfer_max(1000));
    gw.wait_metric(&reloads("ok"), 1.0).await;
    assert_eq!(transfer(&fx, &gw, "fixed", 150).await, Ok(accept(150)));
    gw.stop().await;
}

#[tokio::test]
async fn operations_in_flight_keep_the_policy_they_started_with() {
    let fx = Fixture::with_policy(&transfer_max(100));
    let gw = fx.gateway().await;
    // Asked under maximum 100...
    let loose = tool("transfer", json!({"tag": "inflight-loose"}));
    let q_loose = asked(&loose.start(&gw).await);

    fx.write_policy(&transfer_max(10));
    gw.wait_metric(&reloads("ok"), 1.0).await;
    // ...answered after the reload to maximum 10: the operation's own policy decides.
    let out = output(&loose.answer(&gw, &q_loose, accept(50)).await);
    assert_eq!(out["content"], json!({"amount": 50}));
    assert_eq!(
        received(&fx.log.only_answer("inflight-loose").await),
        accept(50)
    );

    // A new operation gets the new policy.
    let strict = tool("transfer", json!({"tag": "inflight-strict"}));
    let q_strict = asked(&strict.start(&gw).await);
    fx.write_policy(&transfer_max(1000));
    gw.wait_metric(&reloads("ok"), 2.0).await;
    let r = strict.answer(&gw, &q_strict, accept(50)).await;
    let again = asked(&r);
    assert!(
        again.message().contains("at most 10; 50 was given"),
        "{}",
        again.message()
    );
    // Still under the policy it started with, re-ask included.
    let again = asked(&strict.answer(&gw, &again, accept(11)).await);
    assert!(again.message().contains("at most 10; 11 was given"));
    let r = strict.answer(&gw, &again, accept(10)).await;
    assert_eq!(output(&r)["content"], json!({"amount": 10}));
    assert_eq!(
        fx.log
            .answers("inflight-strict")
            .iter()
            .map(received)
            .collect::<Vec<_>>(),
        [accept(10)]
    );
    gw.stop().await;
}
