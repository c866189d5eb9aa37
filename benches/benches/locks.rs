//! `locks`: what recording holds and waits adds to tokio's `Mutex`, and
//! what `deadlocks()` costs over many tasks.
//!
//! # What runs
//!
//! Everything runs on a `current_thread` runtime driven by the benchmark
//! thread, timed with that thread's CPU time ([`benches::clock`]), inside
//! a traced task (so that each hold and wait is recorded with its task).
//!
//! - `locks_uncontended`: one task locks and unlocks a free mutex, `iters`
//!   times. Variants `tokio` (`tokio::sync::Mutex`, the baseline) and
//!   `async-stack` (`async_stack::sync::Mutex`, which wraps it). The
//!   target: at most 10 ns above the baseline.
//! - `locks_contended`: two tasks take turns with one mutex, each holding
//!   it across a `yield_now`, so that every lock waits (one `Pending`, one
//!   wake) for the other task to release it; time per iteration covers
//!   two such waits. Target: at most 50 ns above the baseline per wait.
//! - `deadlocks`: `async_stack::deadlocks()` with 10,000 live traced tasks,
//!   1,000 of them waiting in 500 two-task lock-order inversions (the
//!   worst case: every wait is a candidate, so both passes run), and what
//!   it costs with the 9,000 idle tasks only and nobody waiting. Target:
//!   at most 5 ms.
//!
//! # How to read it
//!
//! `locks_*`: criterion's time is per lock (uncontended) or per round of
//! two waits (contended); the difference between the two variants is the
//! price of the records. `deadlocks`: the time of one call.

use std::hint::black_box;
use std::sync::Arc;

use async_stack::TracedExt;
use benches::clock::BenchClock;
use criterion::{Criterion, criterion_group, criterion_main};

const TOKIO: &str = "tokio";
const ASYNC_STACK: &str = "async-stack";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
}

/// Runs `body` in a traced task of `rt` and returns what it measured.
fn in_traced_task<F>(rt: &tokio::runtime::Runtime, body: F) -> std::time::Duration
where
    F: Future<Output = std::time::Duration> + Send + 'static,
{
    rt.block_on(async { async_stack::tokio::spawn(body.traced()).await })
        .expect("the timed task does not panic")
}

/// `iters` locks and unlocks of a free mutex by one traced task.
macro_rules! lock_alone {
    ($rt:expr, $m:expr, $iters:expr) => {{
        let (m, iters) = ($m, $iters);
        in_traced_task($rt, async move {
            let start = benches::clock::now();
            for _ in 0..iters {
                *black_box(&m).lock().await += 1;
            }
            benches::clock::now() - start
        })
    }};
}

fn uncontended(c: &mut Criterion<BenchClock>) {
    let rt = runtime();
    let mut group = c.benchmark_group("locks_uncontended");
    let theirs = Arc::new(tokio::sync::Mutex::new(0u64));
    group.bench_function(TOKIO, |b| {
        b.iter_custom(|iters| lock_alone!(&rt, theirs.clone(), iters));
    });
    let ours = Arc::new(async_stack::sync::Mutex::new(0u64));
    group.bench_function(ASYNC_STACK, |b| {
        b.iter_custom(|iters| lock_alone!(&rt, ours.clone(), iters));
    });
    group.finish();
}

/// `iters` rounds of two tasks taking turns with a mutex, each waiting
/// for the other once per round.
macro_rules! take_turns {
    ($rt:expr, $m:expr, $iters:expr) => {{
        let (m, iters) = ($m, $iters);
        in_traced_task($rt, async move {
            let other = {
                let m = m.clone();
                async_stack::tokio::spawn(
                    async move {
                        for _ in 0..iters {
                            let g = m.lock().await;
                            tokio::task::yield_now().await;
                            drop(g);
                        }
                    }
                    .traced(),
                )
            };
            let start = benches::clock::now();
            for _ in 0..iters {
                let g = m.lock().await;
                tokio::task::yield_now().await;
                drop(g);
            }
            other.await.expect("the other task does not panic");
            benches::clock::now() - start
        })
    }};
}

fn contended(c: &mut Criterion<BenchClock>) {
    let rt = runtime();
    let mut group = c.benchmark_group("locks_contended");
    group.bench_function(TOKIO, |b| {
        b.iter_custom(|iters| take_turns!(&rt, Arc::new(tokio::sync::Mutex::new(())), iters));
    });
    group.bench_function(ASYNC_STACK, |b| {
        b.iter_custom(|iters| take_turns!(&rt, Arc::new(async_stack::sync::Mutex::new(())), iters));
    });
    group.finish();
}

/// Live idle tasks of the `deadlocks` bench.
const IDLE: usize = 9_000;
/// Inversions (two waiting tasks each).
const INVERSIONS: usize = 500;

#[async_stack::traced_async]
async fn idle(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[async_stack::traced_async]
async fn lock_both(
    first: Arc<async_stack::sync::Mutex<()>>,
    second: Arc<async_stack::sync::Mutex<()>>,
    go: Arc<tokio::sync::Barrier>,
) {
    let _a = first.lock().await;
    go.wait().await;
    let _b = second.lock().await;
}

fn deadlocks(c: &mut Criterion<BenchClock>) {
    let rt = runtime();
    let mut group = c.benchmark_group("deadlocks");
    let mut stop = Vec::new();
    rt.block_on(async {
        for _ in 0..IDLE {
            let (tx, rx) = tokio::sync::oneshot::channel();
            stop.push(tx);
            drop(tokio::spawn(idle(rx)));
        }
        tokio::task::yield_now().await;
    });
    assert!(async_stack::deadlocks().is_empty());
    group.bench_function("nobody_waits", |b| {
        b.iter(|| black_box(async_stack::deadlocks()));
    });
    let handles = rt.block_on(async {
        let go = Arc::new(tokio::sync::Barrier::new(2 * INVERSIONS));
        let handles: Vec<_> = (0..INVERSIONS)
            .flat_map(|_| {
                let a = Arc::new(async_stack::sync::Mutex::new(()));
                let b = Arc::new(async_stack::sync::Mutex::new(()));
                [
                    tokio::spawn(lock_both(a.clone(), b.clone(), go.clone())),
                    tokio::spawn(lock_both(b, a, go.clone())),
                ]
            })
            .collect();
        for _ in 0..1000 {
            if async_stack::deadlocks().len() == INVERSIONS {
                break;
            }
            tokio::task::yield_now().await;
        }
        handles
    });
    assert_eq!(
        async_stack::deadlocks().len(),
        INVERSIONS,
        "every inversion staged"
    );
    group.bench_function("1000_of_10000_waiting", |b| {
        b.iter(|| black_box(async_stack::deadlocks()));
    });
    group.finish();
    for h in &handles {
        h.abort();
    }
    drop(stop);
    rt.block_on(async {
        for h in handles {
            let _ = h.await;
        }
    });
}

criterion_group! {
    name = benches;
    config = benches::clock::criterion();
    targets = uncontended, contended, deadlocks
}
criterion_main!(benches);
