//! A wait belongs to the task that polls it now, not to the task that
//! first did: an acquire future or a `JoinHandle` polled once in one task
//! and then moved to (and awaited in) another is that other task's wait.
//!
//! Before, the wait stayed the first task's, so a first task that holds a
//! lock the awaited side needs was reported in a deadlock it is not in.
//! Each scenario runs on one thread, step by step (no timer), until every
//! task waits; then `deadlocks()` must be empty while the dump shows the
//! wait under the task that has it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use async_stack::sync::Mutex;
use async_stack::traced_async;
use tokio::sync::oneshot;

/// One scenario at a time: each reads the whole process's waits.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `scenario` on a current-thread runtime, alone in the process.
fn run(scenario: impl Future<Output = ()>) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(scenario);
}

/// Polls `fut` once, here, in the calling task.
async fn poll_once(fut: &mut Pin<Box<dyn Future<Output = ()> + Send>>) {
    std::future::poll_fn(|cx| {
        assert!(fut.as_mut().poll(cx).is_pending(), "it waits");
        Poll::Ready(())
    })
    .await;
}

/// Polls `fut` once in the calling task, then hands it to a new task,
/// which awaits it after telling `polled` it has polled it too.
async fn hand_over(fut: impl Future<Output = ()> + Send + 'static, polled: oneshot::Sender<()>) {
    let mut fut: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(fut);
    poll_once(&mut fut).await;
    async_stack::tokio::spawn(await_elsewhere(fut, polled));
}

/// Awaits `fut`, first telling `polled` it has been polled.
#[traced_async]
async fn await_elsewhere(
    mut fut: Pin<Box<dyn Future<Output = ()> + Send>>,
    polled: oneshot::Sender<()>,
) {
    poll_once(&mut fut).await;
    polled.send(()).unwrap();
    fut.await;
}

/// Holds `l`, polls a lock of `m` once (held by [`lock_m_then_l`]), hands
/// that future to another task, and waits for `go`.
#[traced_async]
async fn move_a_lock_future(
    l: Arc<Mutex<()>>,
    m: Arc<Mutex<()>>,
    other_has_m: oneshot::Receiver<()>,
    polled: oneshot::Sender<()>,
    go: oneshot::Receiver<()>,
) {
    let held = l.lock().await;
    other_has_m.await.unwrap();
    hand_over(
        async move {
            let _g = m.lock_owned().await;
        },
        polled,
    )
    .await;
    go.await.unwrap();
    drop(held);
}

#[traced_async]
async fn lock_m_then_l(m: Arc<Mutex<()>>, l: Arc<Mutex<()>>, has_m: oneshot::Sender<()>) {
    let _m = m.lock().await;
    has_m.send(()).unwrap();
    let _l = l.lock().await;
}

/// Gives every task turns until nothing runs.
async fn settle() {
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
}

/// The lines of the dump that say what a task waits for, by task.
fn waits_in_dump() -> Vec<(u64, String)> {
    let dump = async_stack::dump();
    let mut out = Vec::new();
    for t in &dump.tasks {
        let text = t.to_string();
        for line in text.lines().filter(|l| l.contains("waiting for")) {
            out.push((t.id, line.trim().to_owned()));
        }
    }
    out
}

/// Checks that no deadlock is reported, and that the dump shows two
/// waits, neither of them the task of root `mover` (this file's fn of
/// that name), which waits for a message only.
fn no_deadlock_and_two_waits_but_the_movers(mover: &str) {
    let found = async_stack::deadlocks();
    assert!(found.is_empty(), "no deadlock: {found:?}");
    let waits = waits_in_dump();
    let root = format!("deadlock_moved_waits::{mover}");
    let mover_id = async_stack::dump()
        .tasks
        .iter()
        .find(|t| t.root.as_deref() == Some(root.as_str()))
        .map(|t| t.id)
        .expect("the mover is a task");
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert!(
        waits.iter().all(|(task, _)| *task != mover_id),
        "the mover waits for a message only: {waits:?}"
    );
}

#[test]
fn a_moved_acquire_future_waits_in_the_task_that_polls_it() {
    run(async {
        let l = Arc::new(Mutex::new(()));
        let m = Arc::new(Mutex::new(()));
        let (has_m_tx, has_m_rx) = oneshot::channel();
        let (polled_tx, polled_rx) = oneshot::channel();
        let (go_tx, go_rx) = oneshot::channel();
        let mover = async_stack::tokio::spawn(move_a_lock_future(
            Arc::clone(&l),
            Arc::clone(&m),
            has_m_rx,
            polled_tx,
            go_rx,
        ));
        let other = async_stack::tokio::spawn(lock_m_then_l(m, l, has_m_tx));
        polled_rx.await.unwrap();
        settle().await;

        // The other task's and the new one's.
        no_deadlock_and_two_waits_but_the_movers("move_a_lock_future");

        go_tx.send(()).unwrap();
        mover.await.unwrap();
        other.await.unwrap();
    });
}

/// Holds `l`, spawns a task that locks it, polls that task's handle once
/// here, hands the handle to another task, and waits for `go`.
#[traced_async]
async fn move_a_join_handle(
    l: Arc<Mutex<()>>,
    polled: oneshot::Sender<()>,
    go: oneshot::Receiver<()>,
) {
    let held = l.lock().await;
    let child = async_stack::tokio::spawn(lock_once(Arc::clone(&l)));
    hand_over(
        async move {
            child.await.unwrap();
        },
        polled,
    )
    .await;
    go.await.unwrap();
    drop(held);
}

#[traced_async]
async fn lock_once(l: Arc<Mutex<()>>) {
    let _l = l.lock().await;
}

#[test]
fn a_moved_join_handle_waits_in_the_task_that_polls_it() {
    run(async {
        let l = Arc::new(Mutex::new(()));
        let (polled_tx, polled_rx) = oneshot::channel();
        let (go_tx, go_rx) = oneshot::channel();
        let mover = async_stack::tokio::spawn(move_a_join_handle(l, polled_tx, go_rx));
        polled_rx.await.unwrap();
        settle().await;

        // The child's lock and the new task's join.
        no_deadlock_and_two_waits_but_the_movers("move_a_join_handle");

        go_tx.send(()).unwrap();
        mover.await.unwrap();
    });
}
