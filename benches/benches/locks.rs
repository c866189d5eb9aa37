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
//! - `locks_uncontended_shared`: the same for the shared acquires: a read
//!   of a free `RwLock` (`read/`), a permit of a `Semaphore` with permits
//!   to spare (`permit/`), acquired and released `iters` times. No target
//!   was set. A shared hold takes one of the resource's shared slots with
//!   one compare-and-swap and frees it with a store, where an exclusive
//!   hold is a few plain stores (until 2026-11-28, a list entry under the
//!   resource's own lock, taken at the acquire and again at the release).
//! - `locks_contended`: two tasks take turns with one mutex, each holding
//!   it across a `yield_now`, so that every lock waits (one `Pending`, one
//!   wake) for the other task to release it; time per iteration covers
//!   two such waits. Target: at most 50 ns above the baseline per wait.
//!   The waits overlap (a task unlocks and locks again before the other's
//!   wait has ended), so the mutex keeps waiters throughout and is listed
//!   in the waits registry once for the whole run.
//! - `locks_first_wait`: one task holds the mutex while the other queues
//!   for it, then lets it go, and locks again only once the waiter has
//!   taken and dropped it (the two pass turns through an atomic, yielding
//!   until it is theirs): every wait is the mutex's first and last, and
//!   lists and unlists it (see `benches/src/bin/locks_probe.rs`, scenario
//!   `contended`). The waiter asserts, with `try_lock`, that the mutex is
//!   held each time it queues. A round is one wait and one uncontended
//!   lock: subtract `locks_uncontended`'s difference from the round's to
//!   get the wait's.
//! - `deadlocks`: `async_stack::deadlocks()` with 10,000 live traced tasks,
//!   1,000 of them waiting in 500 two-task lock-order inversions (the
//!   worst case: every wait is a candidate, so both passes run), and what
//!   it costs with the 9,000 idle tasks only and nobody waiting, and with
//!   10,000 live mutexes as well that each had one wait, long over (a
//!   mutex stays listed in the waits registry from its first wait until it
//!   is dropped, so this is what a service with many rarely contended
//!   locks pays). Target: at most 5 ms.
//!
//! # How to read it
//!
//! `locks_*`: criterion's time is per lock (uncontended) or per round of
//! two waits (contended) or per round of one wait and one free lock
//! (first wait); the difference between the two variants is the
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

/// `iters` shared acquires and releases of a free `RwLock` (a read) or
/// `Semaphore` (a permit) by one traced task: `$acquire` is the
/// expression that acquires, given the lock as `l`.
macro_rules! share_alone {
    ($rt:expr, $l:expr, $iters:expr, |$x:ident| $acquire:expr) => {{
        let (l, iters) = ($l, $iters);
        in_traced_task($rt, async move {
            let start = benches::clock::now();
            for _ in 0..iters {
                let $x = black_box(&l);
                drop(black_box($acquire));
            }
            benches::clock::now() - start
        })
    }};
}

fn uncontended_shared(c: &mut Criterion<BenchClock>) {
    let rt = runtime();
    let mut group = c.benchmark_group("locks_uncontended_shared");
    let theirs = Arc::new(tokio::sync::RwLock::new(0u64));
    group.bench_function("read/tokio", |b| {
        b.iter_custom(|iters| share_alone!(&rt, theirs.clone(), iters, |l| l.read().await));
    });
    let ours = Arc::new(async_stack::sync::RwLock::new(0u64));
    group.bench_function("read/async-stack", |b| {
        b.iter_custom(|iters| share_alone!(&rt, ours.clone(), iters, |l| l.read().await));
    });
    let theirs = Arc::new(tokio::sync::Semaphore::new(4));
    group.bench_function("permit/tokio", |b| {
        b.iter_custom(|iters| share_alone!(&rt, theirs.clone(), iters, |l| l.acquire().await));
    });
    let ours = Arc::new(async_stack::sync::Semaphore::new(4));
    group.bench_function("permit/async-stack", |b| {
        b.iter_custom(|iters| share_alone!(&rt, ours.clone(), iters, |l| l.acquire().await));
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

/// `iters` rounds, each one wait that is the mutex's first and last: a
/// holder and a waiter that never queue at the same time. They pass turns
/// through `turn` (whoever's turn it is not yields until it is), so the
/// order does not depend on the runtime's queue: the waiter queues only
/// while the holder has the mutex, and the holder locks again only after
/// the waiter has dropped it.
macro_rules! one_wait_each {
    ($rt:expr, $m:expr, $iters:expr) => {{
        use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
        const HELD: u8 = 1;
        const QUEUED: u8 = 2;
        const DONE: u8 = 3;
        let (m, iters) = ($m, $iters);
        let turn = Arc::new(AtomicU8::new(DONE));
        in_traced_task($rt, async move {
            let waiter = {
                let (m, turn) = (m.clone(), turn.clone());
                async_stack::tokio::spawn(
                    async move {
                        for _ in 0..iters {
                            while turn.load(Relaxed) != HELD {
                                tokio::task::yield_now().await;
                            }
                            assert!(m.try_lock().is_err(), "the holder has the mutex");
                            turn.store(QUEUED, Relaxed);
                            drop(m.lock().await);
                            turn.store(DONE, Relaxed);
                        }
                    }
                    .traced(),
                )
            };
            let start = benches::clock::now();
            for _ in 0..iters {
                let g = m.lock().await;
                turn.store(HELD, Relaxed);
                while turn.load(Relaxed) != QUEUED {
                    tokio::task::yield_now().await;
                }
                drop(g);
                while turn.load(Relaxed) != DONE {
                    tokio::task::yield_now().await;
                }
            }
            waiter.await.expect("the waiter does not panic");
            benches::clock::now() - start
        })
    }};
}

fn first_wait(c: &mut Criterion<BenchClock>) {
    let rt = runtime();
    let mut group = c.benchmark_group("locks_first_wait");
    group.bench_function(TOKIO, |b| {
        b.iter_custom(|iters| one_wait_each!(&rt, Arc::new(tokio::sync::Mutex::new(())), iters));
    });
    group.bench_function(ASYNC_STACK, |b| {
        b.iter_custom(|iters| {
            one_wait_each!(&rt, Arc::new(async_stack::sync::Mutex::new(())), iters)
        });
    });
    group.finish();
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

/// Live mutexes of the `deadlocks` bench that each had one wait, long
/// over.
const ONCE_CONTENDED: usize = 10_000;

/// `n` mutexes, each waited for once by a traced task while another held
/// it: each stays listed in the waits registry, with no wait, until it is
/// dropped.
async fn contended_once(n: usize) -> Vec<Arc<async_stack::sync::Mutex<()>>> {
    let mut locks = Vec::with_capacity(n);
    for _ in 0..n {
        let m = Arc::new(async_stack::sync::Mutex::new(()));
        let held = m.clone().lock_owned().await;
        let queued = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waiter = tokio::spawn({
            let (m, queued) = (m.clone(), queued.clone());
            async move {
                // One thread: nothing runs between the flag and the
                // `lock()`'s first poll, which waits (the mutex is held).
                queued.store(true, std::sync::atomic::Ordering::Relaxed);
                drop(m.lock().await)
            }
            .traced()
        });
        while !queued.load(std::sync::atomic::Ordering::Relaxed) {
            tokio::task::yield_now().await;
        }
        drop(held);
        waiter.await.expect("the waiter ends");
        locks.push(m);
    }
    locks
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
    let locks = rt.block_on(contended_once(ONCE_CONTENDED));
    assert!(async_stack::deadlocks().is_empty());
    group.bench_function("nobody_waits_10000_locks_contended_once", |b| {
        b.iter(|| black_box(async_stack::deadlocks()));
    });
    drop(locks);
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
    targets = uncontended, uncontended_shared, contended, first_wait, deadlocks
}
criterion_main!(benches);
