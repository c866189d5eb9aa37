//! A long queue for one resource costs `deadlocks()` memory in proportion
//! to its length: each waiter is blocked by the waiter directly ahead of
//! it, not by every waiter ahead (which made 4,000 waiters take 1.9 GB
//! and 8,000 abort the process), and a deadlock through such a queue is
//! reported whole, with the edges of that chain.
//!
//! A test binary of its own, because it replaces the global allocator
//! with one that tracks the live bytes of the whole process. Its tests
//! run one at a time (`SERIAL`): the peak is the whole process's, and
//! `deadlocks()` reads every task of the process.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_stack::ResourceKind;
use async_stack::sync::{Mutex, Semaphore};
use async_stack::tokio::spawn_named;
use async_stack::{WaitEdge, traced_async};
use tokio::sync::oneshot;

use common::{deadlock_of, task_id};

mod common;
mod live_bytes;

#[global_allocator]
static GLOBAL: live_bytes::Tracking = live_bytes::Tracking;

/// Held by each test for its whole run.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// One thread: a task polled once has recorded its wait by the time the
/// test's own future runs again.
fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The line of this file that ends with the comment `// {marker}`.
fn line_of(marker: &str) -> u32 {
    common::marker_line("tests/deadlock_queue_memory.rs", marker)
}

#[traced_async]
async fn acquire(s: Arc<Semaphore>, queued: Arc<AtomicUsize>, ready: oneshot::Sender<u64>) {
    ready.send(task_id()).unwrap();
    queued.fetch_add(1, Ordering::Relaxed);
    let _p = s.acquire().await.unwrap();
}

/// Spawns `n` tasks that queue on `s`, and returns once all of them are
/// queued (they count themselves just before they wait, in the same
/// poll).
async fn queue_on(s: &Arc<Semaphore>, n: usize) -> Vec<u64> {
    let queued = Arc::new(AtomicUsize::new(0));
    let ids: Vec<oneshot::Receiver<u64>> = (0..n)
        .map(|_| {
            let (tx, rx) = oneshot::channel();
            let (s, queued) = (s.clone(), queued.clone());
            spawn_named("queued", acquire(s, queued, tx));
            rx
        })
        .collect();
    while queued.load(Ordering::Relaxed) < n {
        tokio::task::yield_now().await;
    }
    let mut out = Vec::with_capacity(n);
    for rx in ids {
        out.push(rx.await.unwrap());
    }
    out
}

/// The peak of live heap bytes during one `deadlocks()` call while
/// `waiters` traced tasks are queued on one `Semaphore::new(0)` (nobody
/// holds it: its first waiter waits for code outside any task, so none of
/// them is stuck).
fn peak_of_one_call(waiters: usize) -> usize {
    rt().block_on(async {
        let s = Arc::new(Semaphore::new(0));
        let ids = queue_on(&s, waiters).await;
        assert_eq!(ids.len(), waiters);
        // Once to warm what the first call sets up for good.
        assert!(async_stack::deadlocks().is_empty());
        let (found, peak) = live_bytes::peak_during(async_stack::deadlocks);
        assert!(found.is_empty(), "{found:?}");
        peak
    })
}

/// An edge to every waiter ahead made 2,000 waiters cost 2,000 × 1,999 / 2
/// edges, a peak of 475 MB (and 4,000 waiters 1.9 GB, in a release build);
/// an edge to the waiter directly ahead peaks at 2.0 MB (4,000: 4.1 MB).
/// The bound is eight times the one and a thirtieth of the other; the
/// second run checks that the growth is not quadratic either.
#[test]
fn a_long_queue_costs_memory_in_proportion_to_its_length() {
    let _serial = serial();
    let two = peak_of_one_call(2_000);
    let four = peak_of_one_call(4_000);
    eprintln!("peak of one deadlocks() call: +{two} B for 2,000 waiters, +{four} B for 4,000");
    assert!(two < 16_000_000, "2,000 waiters: peak +{two} B");
    // Linear growth doubles it; quadratic would quadruple it.
    assert!(four < 3 * two, "2,000 waiters: +{two} B; 4,000: +{four} B");
}

#[traced_async]
async fn lock_both(
    first: Arc<Mutex<u8>>,
    second: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    go: oneshot::Receiver<()>,
) {
    let _a = first.lock().await; // FIRST_LOCK
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    let _b = second.lock().await; // SECOND_LOCK
}

#[traced_async]
async fn lock(m: Arc<Mutex<u8>>, queued: Arc<AtomicUsize>, ready: oneshot::Sender<u64>) {
    ready.send(task_id()).unwrap();
    queued.fetch_add(1, Ordering::Relaxed);
    let _g = m.lock().await; // QUEUED_LOCK
}

/// What an edge says, in a form to compare: waiter, waiting-at line,
/// resource's creation line, holder, acquired-at line, and the line of
/// the wait it is queued behind.
type Seen = (u64, u32, u32, u64, Option<u32>, Option<u32>);

fn seen(e: &WaitEdge) -> Seen {
    assert_eq!(e.resource, ResourceKind::Mutex);
    assert_eq!(e.created_at.file, file!());
    (
        e.waiter,
        e.waiting_at.as_ref().unwrap().line,
        e.created_at.line,
        e.holder,
        e.acquired_at.as_ref().map(|l| l.line),
        e.queued_ahead.as_ref().map(|l| l.line),
    )
}

/// `a` holds `l1` and queues for `l2` behind 100 waiting tasks; `b` holds
/// `l2` and waits for `l1`. The 100 wait for `b` (the holder), and `b`
/// reaches every one of them through `a` and the queue, so the deadlock
/// is all 102: none of them can ever run.
#[test]
fn a_deadlock_through_a_queue_is_reported_with_the_queue() {
    let _serial = serial();
    rt().block_on(async {
        let l1 = Arc::new(Mutex::new(0)); // L1
        let l2 = Arc::new(Mutex::new(0)); // L2
        let (ready_a, a) = oneshot::channel();
        let (ready_b, b) = oneshot::channel();
        let (go_a, wait_a) = oneshot::channel();
        let (go_b, wait_b) = oneshot::channel();
        let _ha = spawn_named("a", lock_both(l1.clone(), l2.clone(), ready_a, wait_a));
        let _hb = spawn_named("b", lock_both(l2.clone(), l1.clone(), ready_b, wait_b));
        let (a, b) = (a.await.unwrap(), b.await.unwrap());

        let queued = Arc::new(AtomicUsize::new(0));
        let queue: Vec<u64> = {
            let ids: Vec<_> = (0..100)
                .map(|_| {
                    let (tx, rx) = oneshot::channel();
                    let (l2, queued) = (l2.clone(), queued.clone());
                    spawn_named("queued", lock(l2, queued, tx));
                    rx
                })
                .collect();
            while queued.load(Ordering::Relaxed) < 100 {
                tokio::task::yield_now().await;
            }
            let mut out = Vec::new();
            for rx in ids {
                out.push(rx.await.unwrap());
            }
            out
        };
        // The queue is in the order the tasks first ran, which is the
        // order of their ids (one thread); `a` and `b` came first.
        assert!(queue.is_sorted(), "{queue:?}");
        assert!(a < b && b < queue[0], "a {a}, b {b}, queue {queue:?}");
        // Only now does `a` queue for `l2`: behind all 100.
        go_a.send(()).unwrap();
        go_b.send(()).unwrap();

        let mut tasks = vec![a, b];
        tasks.extend(&queue);
        let d = deadlock_of(&tasks).await;

        let (first, second, queued_at) = (
            line_of("FIRST_LOCK"),
            line_of("SECOND_LOCK"),
            line_of("QUEUED_LOCK"),
        );
        let (l1, l2) = (line_of("L1"), line_of("L2"));
        // The cycle from the smallest id, `a`: it waits for `l2`, held by
        // `b`, which waits for `l1`, held by `a`.
        let mut want: Vec<Seen> = vec![
            (a, second, l2, b, Some(first), None),
            (b, second, l1, a, Some(first), None),
        ];
        // Then the other edges, by waiter: `a` is queued behind the last
        // of the 100 (not behind each of them), and each of the 100 waits
        // for `b` and for the one directly ahead of it.
        want.push((a, second, l2, queue[99], None, Some(queued_at)));
        for (k, &w) in queue.iter().enumerate() {
            want.push((w, queued_at, l2, b, Some(first), None));
            if k > 0 {
                want.push((w, queued_at, l2, queue[k - 1], None, Some(queued_at)));
            }
        }
        let got: Vec<Seen> = d.edges.iter().map(seen).collect();
        assert_eq!(got, want);

        let text = d.to_string();
        let file = file!();
        assert!(
            text.starts_with(&format!(
                "deadlock: 102 tasks wait for each other\n\n\
                 task {a} \"a\" waits at {file}:{second}:"
            )),
            "{text}"
        );
        let behind = format!("task {} \"queued\" waits at {file}:{queued_at}:", queue[1]);
        let behind_at = text.find(&behind).expect(&text);
        assert!(
            text[behind_at..].contains(&format!("for Mutex created at {file}:{l2}:")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "queued behind task {} (waiting at {file}:{queued_at}:",
                queue[0]
            )),
            "{text}"
        );
    });
}
