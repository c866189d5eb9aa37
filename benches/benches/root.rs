//! `root`: the cost of a task root, paid once per task.
//!
//! # What runs
//!
//! A one-level future `one(pending)` that awaits a leaf which is `Pending`
//! `pending` times. One iteration creates it, polls it to completion with a
//! bare loop and a no-op waker ([`benches::poll_to_completion`], no runtime)
//! from outside any traced frame, and drops it. The parameter is the number
//! of polls: 1 (ready on the first poll) or 2 (one `Pending` first, so the
//! root stays registered across a return to the "executor").
//!
//! Variants, in one criterion group so they run in the same process:
//!
//! - `untraced`: a plain async fn. The baseline.
//! - `async-stack`: `#[async_stack::traced_async]` on `one`. Polled with no
//!   traced frame active, it is a task root: registered in the task registry
//!   on its first poll, removed on completion.
//! - `async-stack .traced()`: the plain `one` wrapped by
//!   `async_stack::TracedExt::traced()`, the same root through the wrapper.
//! - `async-backtrace`: `#[async_backtrace::framed]` on `one`; with no active
//!   frame it registers itself in async-backtrace's task set.
//! - `await-tree`: the plain `one` inside
//!   `Registry::register(key, "one").instrument(..)`, await-tree's root.
//!
//! # How to read it
//!
//! Times are the benchmark thread's CPU time ([`benches::clock`];
//! `BENCH_CLOCK=wall` for wall time), so other processes on the machine
//! inflate them less.
//!
//! # Inside a tokio task
//!
//! The group `root_tokio` runs the same tasks (`untraced`, `async-stack`,
//! `async-backtrace`) inside one task of a `current_thread` tokio runtime
//! (`iter_custom`: the timed loop is the body of a spawned task), where
//! `async-stack` files each root under its tokio task on its first poll
//! (`tokio::task::try_id()`, the extension's two words and an order
//! number). What filing adds per root is `root_tokio`'s extra over
//! untraced minus `root`'s; per poll, the same difference between 2 and
//! 1 polls (every poll after the first is the same code in or out of
//! tokio).
//!
//! Criterion's time is per task (create, 1 or 2 polls, drop). The price of a
//! root is `time(variant) - time(untraced)`, in ns per task; the ratio
//! `time(variant) / time(untraced)` is large because the baseline does almost
//! nothing. Single-threaded, so registry locks are never contended here.
//! `cargo run -p benches --bin summary` prints the table.

use std::hint::black_box;

use async_stack::TracedExt;
use benches::clock::BenchClock;
use benches::{names, poll_to_completion, yield_leaf};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// Polls per task measured: ready at once, or after one `Pending`.
const POLLS: [u32; 2] = [1, 2];

async fn untraced_one(pending: u32) {
    yield_leaf(pending).await
}

#[async_stack::traced_async]
async fn async_stack_one(pending: u32) {
    yield_leaf(pending).await
}

#[async_backtrace::framed]
async fn async_backtrace_one(pending: u32) {
    yield_leaf(pending).await
}

fn root(c: &mut Criterion<BenchClock>) {
    let registry = await_tree::Registry::new(await_tree::Config::default());
    let mut group = c.benchmark_group(names::ROOT);
    for polls in POLLS {
        let pending = polls - 1;
        let mut bench = |name: &str, task: &dyn Fn(u32) -> u32| {
            group.bench_with_input(BenchmarkId::new(name, polls), &pending, |b, &pending| {
                b.iter(|| assert_eq!(task(black_box(pending)), polls));
            });
        };
        bench(names::UNTRACED, &|p| poll_to_completion(untraced_one(p)).1);
        bench(names::ASYNC_STACK, &|p| {
            poll_to_completion(async_stack_one(p)).1
        });
        bench(names::ASYNC_STACK_TRACED_EXT, &|p| {
            poll_to_completion(untraced_one(p).traced()).1
        });
        bench(names::ASYNC_BACKTRACE, &|p| {
            poll_to_completion(async_backtrace_one(p)).1
        });
        bench(names::AWAIT_TREE, &|p| {
            let root = registry.register(names::ROOT, "one");
            poll_to_completion(root.instrument(untraced_one(p))).1
        });
    }
    group.finish();
}

/// A one-level task run to completion, given its `pending`; returns its
/// polls.
type Task = fn(u32) -> u32;

/// `iters` runs of `task(pending)`, timed inside one task of `rt`.
fn in_tokio_task(
    rt: &tokio::runtime::Runtime,
    iters: u64,
    pending: u32,
    task: Task,
) -> std::time::Duration {
    rt.block_on(async move {
        tokio::spawn(async move {
            let start = benches::clock::now();
            for _ in 0..iters {
                black_box(task(black_box(pending)));
            }
            benches::clock::now() - start
        })
        .await
        .expect("the timed task does not panic")
    })
}

fn root_tokio(c: &mut Criterion<BenchClock>) {
    // One thread: the spawned task runs on the benchmark thread, whose CPU
    // time the clock reads.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group(names::ROOT_TOKIO);
    for polls in POLLS {
        let pending = polls - 1;
        let variants: [(&str, Task); 3] = [
            (names::UNTRACED, |p| poll_to_completion(untraced_one(p)).1),
            (names::ASYNC_STACK, |p| {
                poll_to_completion(async_stack_one(p)).1
            }),
            (names::ASYNC_BACKTRACE, |p| {
                poll_to_completion(async_backtrace_one(p)).1
            }),
        ];
        for (name, task) in variants {
            assert_eq!(task(pending), polls);
            group.bench_with_input(BenchmarkId::new(name, polls), &pending, |b, &pending| {
                b.iter_custom(|iters| in_tokio_task(&rt, iters, pending, task));
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = benches::clock::criterion();
    targets = root, root_tokio
}
criterion_main!(benches);
