//! What awaited spawn-helper `JoinHandle`s keep, held to what the README
//! says ("Deadlocks", cost): a join that waits takes a slot of a
//! never-freed arena, a thread's joins one after another reuse one slot,
//! and slots freed by joins that ended serve the next ones, so the arena
//! never grows past the most joins that waited at once (plus one spare a
//! thread). Each wait shows in the dump while it lasts, and none after.
//!
//! A process of its own: nothing else here awaits a handle.

use async_stack::debug::__testing::join_slots_handed_out;
use async_stack::{ResourceKind, traced_async};

#[traced_async]
async fn work(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[traced_async]
async fn ready() -> u32 {
    7
}

/// Awaits `n` handles one after another, each before its task has run.
#[traced_async]
async fn one_after_another(n: usize) -> u32 {
    let mut sum = 0;
    for _ in 0..n {
        sum += async_stack::tokio::spawn(ready()).await.unwrap();
    }
    sum
}

/// Awaits every handle in `handles` at once (each waits until its sender
/// is dropped).
#[traced_async]
async fn all_at_once(handles: Vec<async_stack::tokio::JoinHandle<()>>) {
    for result in futures::future::join_all(handles).await {
        result.unwrap();
    }
}

/// How many live tasks the dump shows waiting for a `JoinHandle`.
fn join_waits_in_dump() -> usize {
    async_stack::dump::dump()
        .tasks
        .iter()
        .flat_map(|t| &t.waits)
        .filter(|w| w.resource == ResourceKind::JoinHandle)
        .count()
}

const AT_ONCE: usize = 1_000;

#[test]
fn join_slots_stay_at_the_peak_of_joins_waiting_at_once() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(join_slots_handed_out(), 0, "nothing yet");

    // 2,000 joins one after another, each waiting: one slot (the outer
    // join is tokio's own).
    let sum = rt.block_on(async { tokio::spawn(one_after_another(2_000)).await });
    assert_eq!(sum.unwrap(), 2_000 * 7);
    assert_eq!(
        join_slots_handed_out(),
        1,
        "a thread's joins reuse one slot"
    );

    // 1,000 joins waiting at once, twice: the second round reuses the
    // first round's slots.
    for round in 0..2 {
        let _runtime = rt.enter();
        let (senders, handles): (Vec<_>, Vec<_>) = (0..AT_ONCE)
            .map(|_| {
                let (tx, rx) = tokio::sync::oneshot::channel();
                (tx, async_stack::tokio::spawn(work(rx)))
            })
            .unzip();
        let joiner = tokio::spawn(all_at_once(handles));
        // The joiner's first poll awaits every handle; the awaited tasks
        // then wait for their senders.
        rt.block_on(async {
            for _ in 0..AT_ONCE {
                if join_waits_in_dump() == 1 {
                    break;
                }
                tokio::task::yield_now().await;
            }
        });
        // A task shows its first wait: the joiner shows one, while all its
        // joins wait (the slots in use, below).
        assert_eq!(join_waits_in_dump(), 1, "round {round}");
        assert!(
            async_stack::deadlocks().is_empty(),
            "the awaited tasks wait for their senders, not for the joiner"
        );
        assert_eq!(
            join_slots_handed_out(),
            AT_ONCE,
            "round {round}: one slot a waiting join (the first, the thread's spare)"
        );
        drop(senders);
        rt.block_on(joiner).unwrap();
        assert_eq!(join_waits_in_dump(), 0, "round {round}: every wait ended");
    }
    assert_eq!(join_slots_handed_out(), AT_ONCE, "no growth");
}
