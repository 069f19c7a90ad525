//! The shared readers under paused time, with a counting reader in place of
//! a `tasks/get`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::{PollKey, Polls, Reading};

const EVERY: Duration = Duration::from_secs(2);

fn key(task: &str) -> PollKey {
    PollKey {
        route: "main".into(),
        principal: "alice".into(),
        task_id: task.into(),
    }
}

/// A reader that counts its reads and returns what `script` holds now.
fn reader(
    reads: &Arc<AtomicUsize>,
    script: &Arc<Mutex<Option<Value>>>,
) -> impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Value>> + Send>>
+ Send
+ 'static {
    let (reads, script) = (reads.clone(), script.clone());
    move || {
        let (reads, script) = (reads.clone(), script.clone());
        Box::pin(async move {
            reads.fetch_add(1, Ordering::SeqCst);
            script.lock().await.clone()
        })
    }
}

fn task(status: &str) -> Value {
    json!({"taskId": "t", "status": status, "resultType": "complete"})
}

/// Lets the spawned reader run to its next sleep.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn many_listens_on_one_task_share_one_reader() {
    let polls = Polls::default();
    let reads = Arc::new(AtomicUsize::new(0));
    let script = Arc::new(Mutex::new(Some(task("working"))));
    let mut listens: Vec<_> = (0..10)
        .map(|_| polls.subscribe(key("t"), EVERY, reader(&reads, &script)))
        .collect();
    settle().await;
    assert_eq!(polls.running(), 1);
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    for rx in &mut listens {
        let Reading::Read(t) = rx.borrow_and_update().clone() else {
            panic!("not read");
        };
        // What a notification carries: no `resultType`.
        assert_eq!(*t, json!({"taskId": "t", "status": "working"}));
    }
    for _ in 0..5 {
        tokio::time::advance(EVERY).await;
        settle().await;
    }
    assert_eq!(reads.load(Ordering::SeqCst), 6, "one read per interval");
    // Nothing changed: no listener is woken.
    assert!(listens.iter().all(|rx| !rx.has_changed().unwrap()));
}

#[tokio::test(start_paused = true)]
async fn a_change_reaches_every_listener_and_the_end_stops_the_reader() {
    let polls = Polls::default();
    let reads = Arc::new(AtomicUsize::new(0));
    let script = Arc::new(Mutex::new(Some(task("working"))));
    let mut a = polls.subscribe(key("t"), EVERY, reader(&reads, &script));
    settle().await;
    let mut b = polls.subscribe(key("t"), EVERY, reader(&reads, &script));
    // A late listener sees the reading at once.
    assert!(matches!(*b.borrow_and_update(), Reading::Read(_)));
    a.borrow_and_update();
    *script.lock().await = Some(task("completed"));
    tokio::time::advance(EVERY).await;
    settle().await;
    for rx in [&mut a, &mut b] {
        assert!(rx.has_changed().unwrap_or(true));
        let reading = rx.borrow_and_update().clone();
        assert!(reading.is_final(), "{reading:?}");
    }
    assert_eq!(polls.running(), 0, "an ended task is read no more");
    tokio::time::advance(EVERY * 5).await;
    settle().await;
    assert_eq!(reads.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_reader_stops_when_its_last_listener_leaves_and_a_new_one_starts_afresh() {
    let polls = Polls::default();
    let reads = Arc::new(AtomicUsize::new(0));
    let script = Arc::new(Mutex::new(Some(task("working"))));
    let a = polls.subscribe(key("t"), EVERY, reader(&reads, &script));
    let b = polls.subscribe(key("t"), EVERY, reader(&reads, &script));
    settle().await;
    drop(a);
    tokio::time::advance(EVERY).await;
    settle().await;
    assert_eq!(polls.running(), 1, "b still listens");
    drop(b);
    settle().await;
    assert_eq!(polls.running(), 0);
    let before = reads.load(Ordering::SeqCst);
    tokio::time::advance(EVERY * 5).await;
    settle().await;
    assert_eq!(
        reads.load(Ordering::SeqCst),
        before,
        "nobody listens: no reads"
    );
    let mut c = polls.subscribe(key("t"), EVERY, reader(&reads, &script));
    settle().await;
    assert_eq!(reads.load(Ordering::SeqCst), before + 1);
    assert!(matches!(*c.borrow_and_update(), Reading::Read(_)));
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_task_is_gone_for_every_listener() {
    let polls = Polls::default();
    let reads = Arc::new(AtomicUsize::new(0));
    let script = Arc::new(Mutex::new(None));
    let mut a = polls.subscribe(key("t"), EVERY, reader(&reads, &script));
    settle().await;
    assert_eq!(*a.borrow_and_update(), Reading::Gone);
    assert_eq!(polls.running(), 0);
}

#[tokio::test(start_paused = true)]
async fn other_principals_and_tasks_have_their_own_readers() {
    let polls = Polls::default();
    let reads = Arc::new(AtomicUsize::new(0));
    let script = Arc::new(Mutex::new(Some(task("working"))));
    let mut bob = key("t");
    bob.principal = "bob".into();
    let _held = [
        polls.subscribe(key("t"), EVERY, reader(&reads, &script)),
        polls.subscribe(key("u"), EVERY, reader(&reads, &script)),
        polls.subscribe(bob, EVERY, reader(&reads, &script)),
    ];
    settle().await;
    assert_eq!(polls.running(), 3);
    assert_eq!(reads.load(Ordering::SeqCst), 3);
}
