//! `wake`: what wake-graph recording (`async_stack::wake`) adds per poll
//! and per wake, against the same code with recording off, in one run.
//!
//! # What runs
//!
//! No runtime: task roots polled by hand with [`Waker::noop`] as the
//! executor's waker, on the benchmark thread.
//!
//! - `poll`: one poll of a task root whose body returns `Pending` (it is
//!   entered and left: the per-poll hooks).
//! - `wake from task`: one poll of a task root `waker` whose body wakes a
//!   second task `sleeper` [`WAKES_PER_POLL`] times through a clone of
//!   `sleeper`'s waker (a task-to-task edge each time). One iteration is
//!   one such poll.
//! - `wake from runtime`: the benchmark thread, outside any poll, wakes
//!   `sleeper` once (the edge from the runtime, as a driver's wake). One
//!   iteration is one wake.
//! - `poll then wake`: one poll of `sleeper`, then one wake of it from the
//!   runtime: the common case, where each wake is the first since a poll
//!   and so also stamps the wake time (one clock read, which the repeated
//!   wakes above skip).
//!
//! Each has an `off` and an `on` variant in one criterion group.
//!
//! # How to read it
//!
//! The cost recording adds per wake from a task is
//! `(wake from task/on − wake from task/off − (poll/on − poll/off)) / 100`;
//! per wake from the runtime, `wake from runtime/on − wake from runtime/off`;
//! per poll, `poll/on − poll/off`; per first wake after a poll,
//! `poll then wake/on − poll then wake/off − (poll/on − poll/off)`. `cargo run -p benches --bin summary`
//! prints them with the target (at most 50 ns per wake).

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use async_stack::TracedExt;
use benches::clock::BenchClock;
use benches::names;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

use benches::WAKES_PER_POLL;

/// A root that keeps a clone of its waker in `slot` and stays pending.
fn sleeper(slot: Arc<Mutex<Option<Waker>>>) -> impl Future<Output = ()> {
    std::future::poll_fn(move |cx| {
        let mut s = slot.lock().unwrap();
        if s.as_ref().is_none_or(|w| !w.will_wake(cx.waker())) {
            *s = Some(cx.waker().clone());
        }
        Poll::Pending
    })
    .traced()
}

fn wake(c: &mut Criterion<BenchClock>) {
    let mut cx = Context::from_waker(Waker::noop());
    let slot = Arc::new(Mutex::new(None));
    let mut sleeper = pin!(sleeper(slot.clone()));
    assert!(sleeper.as_mut().poll(&mut cx).is_pending());
    let target = slot
        .lock()
        .unwrap()
        .clone()
        .expect("the sleeper kept its waker");

    let t = target.clone();
    let mut waker = pin!(
        std::future::poll_fn(move |_| {
            for _ in 0..WAKES_PER_POLL {
                black_box(&t).wake_by_ref();
            }
            Poll::<()>::Pending
        })
        .traced()
    );
    let mut idle = pin!(std::future::poll_fn(|_| Poll::<()>::Pending).traced());

    let mut group = c.benchmark_group(names::WAKE);
    for on in [false, true] {
        async_stack::wake::record(on);
        // A task is counted from its first poll while recording.
        assert!(sleeper.as_mut().poll(&mut cx).is_pending());
        let variant = if on { names::WAKE_ON } else { names::WAKE_OFF };
        group.bench_function(BenchmarkId::new(names::WAKE_POLL, variant), |b| {
            b.iter(|| assert!(black_box(idle.as_mut()).poll(&mut cx).is_pending()));
        });
        group.bench_function(BenchmarkId::new(names::WAKE_FROM_TASK, variant), |b| {
            b.iter(|| assert!(black_box(waker.as_mut()).poll(&mut cx).is_pending()));
        });
        group.bench_function(BenchmarkId::new(names::WAKE_FROM_RUNTIME, variant), |b| {
            b.iter(|| black_box(&target).wake_by_ref());
        });
        group.bench_function(BenchmarkId::new(names::WAKE_AFTER_POLL, variant), |b| {
            b.iter(|| {
                assert!(black_box(sleeper.as_mut()).poll(&mut cx).is_pending());
                black_box(&target).wake_by_ref();
            });
        });
    }
    async_stack::wake::record(false);
    group.finish();
    // The recording saw the edges it was meant to.
    let g = async_stack::wake::graph();
    assert!(
        g.edges.iter().any(|e| e.wakes > 1000),
        "no edge was recorded: {}",
        g.to_json()
    );
}

criterion_group! {
    name = benches;
    config = benches::clock::criterion();
    targets = wake
}
criterion_main!(benches);
