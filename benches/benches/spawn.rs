//! `spawn`: what a task root adds to a tokio spawn + completion.
//!
//! # What runs
//!
//! One iteration spawns [`SPAWN_TASKS`] (1000) tasks on a tokio runtime and
//! awaits all their `JoinHandle`s: all spawned first, then awaited in spawn
//! order, or (group `spawn_join_current_thread`) each awaited as soon as it
//! is spawned, `spawn(work()).await`, so that every join waits. Each task
//! is a one-level async fn that awaits a leaf ([`benches::yield_leaf`]) which is ready at once (parameter
//! `1`: one poll) or `Pending` once first, waking itself (parameter `2`: two
//! polls, so the task goes back through the run queue once).
//!
//! Variants, in one criterion group so they run in the same process, on the
//! same runtime:
//!
//! - `untraced`: `tokio::spawn(plain())`, a plain async fn. The baseline.
//! - `async-stack`: `tokio::spawn(traced())`, `traced` being
//!   `#[async_stack::traced_async]`. Polled by tokio with no traced frame
//!   active, it is a task root: registered on its first poll (slot, id,
//!   wrapping waker), deregistered on completion.
//! - `async-stack spawn helper`: `async_stack::tokio::spawn(traced())`, which
//!   also records the spawn location and the spawning task. Its handle,
//!   `async_stack::tokio::JoinHandle`, is awaited as users await it: a join
//!   that waits is recorded for `deadlocks()` (a join slot, see
//!   `waits/join.rs`).
//! - `async-backtrace`: `tokio::spawn(framed())`, `framed` being
//!   `#[async_backtrace::framed]`, its task root.
//! - `await-tree`:
//!   `tokio::spawn(registry.register_anonymous("one").instrument(plain()))`,
//!   await-tree's root (what its `Registry::spawn_anonymous` does). Not
//!   keyed by the task's index in the batch: reusing the same 1000 keys in
//!   every batch made await-tree's registry (a `weak_table` map that keeps
//!   expired entries until it resizes) cost ~10 µs per task on the
//!   `multi_thread` runtime, a pathology of the bench, not of await-tree.
//!
//! Three groups, two runtimes:
//!
//! - `spawn_current_thread`: a `current_thread` runtime driven by
//!   `block_on` on the benchmark thread, which spawns the batch and awaits
//!   it. Everything runs on the benchmark thread, timed with its CPU time
//!   ([`benches::clock`]).
//! - `spawn_multi_thread`: a `multi_thread` runtime with 2 workers. The
//!   batch is spawned from a task running on a worker (so spawns go to a
//!   worker's local queue and the other worker steals, as when tasks spawn
//!   tasks), while the benchmark thread waits in `block_on`. Timed with the
//!   **process's** CPU time, all threads summed: a cost, not a latency.
//! - `spawn_join_current_thread`: as `spawn_current_thread`, each task
//!   awaited at once (one poll only). The task runs only once its join has
//!   returned `Pending`, so every join waits: the case where the spawn
//!   helper's handle records a wait.
//!
//! Before measuring, each variant's premise is checked on each runtime: the
//! spawned task really is an async-stack task (with a spawn location for the
//! helper), an async-backtrace task, or inside an await-tree.
//!
//! # How to read it
//!
//! Criterion's time is per batch of 1000 tasks, so µs per batch read as ns
//! per task. The price of instrumenting a task is
//!
//! ```text
//! added ns per task = (time(variant) - time(untraced)) / 1000
//! ```
//!
//! against a target of at most 100 ns for async-stack. The baseline is a
//! real tokio spawn (allocating the task, queueing, polling, completing,
//! joining), so the ratios are modest and the differences are what matter.
//! `cargo run -p benches --bin summary` prints the table; BENCHMARKS.md holds
//! the last run.

use std::hint::black_box;

use await_tree::Registry;
use benches::clock::BenchClock;
use benches::{SPAWN_POLLS, SPAWN_TASKS, names, yield_leaf};
use criterion::measurement::Measurement;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

async fn plain(pending: u32) {
    yield_leaf(pending).await
}

#[async_stack::traced_async]
async fn traced(pending: u32) {
    yield_leaf(pending).await
}

#[async_backtrace::framed]
async fn framed(pending: u32) {
    yield_leaf(pending).await
}

/// A spawned task's handle, of the type its variant gives users.
enum Handle {
    Tokio(JoinHandle<()>),
    /// The spawn helper's, awaited as users await it (a wait it records
    /// for `deadlocks()` when the task has not ended yet).
    AsyncStack(async_stack::tokio::JoinHandle<()>),
}

impl Handle {
    async fn join(self) {
        match self {
            Handle::Tokio(h) => h.await,
            Handle::AsyncStack(h) => h.await,
        }
        .expect("a benchmark task panicked");
    }
}

/// Spawns one task of a batch (`pending`: times its leaf is `Pending`);
/// `registry` is await-tree's, unused by the other variants.
type SpawnOne = fn(registry: &Registry, pending: u32) -> Handle;

/// The variants, in table order.
fn variants() -> [(&'static str, SpawnOne); 5] {
    [
        (names::UNTRACED, |_, p| {
            Handle::Tokio(tokio::spawn(plain(p)))
        }),
        (names::ASYNC_STACK, |_, p| {
            Handle::Tokio(tokio::spawn(traced(p)))
        }),
        (names::ASYNC_STACK_SPAWN_HELPER, |_, p| {
            Handle::AsyncStack(async_stack::tokio::spawn(traced(p)))
        }),
        (names::ASYNC_BACKTRACE, |_, p| {
            Handle::Tokio(tokio::spawn(framed(p)))
        }),
        (names::AWAIT_TREE, |r, p| {
            Handle::Tokio(tokio::spawn(
                r.register_anonymous("one").instrument(plain(p)),
            ))
        }),
    ]
}

/// When a batch awaits its tasks.
#[derive(Clone, Copy)]
enum Shape {
    /// Spawns the whole batch, then awaits every task in spawn order.
    SpawnAllThenJoin,
    /// Awaits each task as soon as it is spawned: on `current_thread`,
    /// every join waits (the task has not run yet), as in
    /// `spawn(work()).await`.
    JoinAtOnce,
}

/// One iteration: spawns [`SPAWN_TASKS`] tasks and awaits them all.
async fn batch(spawn_one: SpawnOne, registry: Registry, pending: u32, shape: Shape) {
    match shape {
        Shape::SpawnAllThenJoin => {
            let handles: Vec<Handle> = (0..SPAWN_TASKS)
                .map(|_| spawn_one(&registry, pending))
                .collect();
            for handle in handles {
                handle.join().await;
            }
        }
        Shape::JoinAtOnce => {
            for _ in 0..SPAWN_TASKS {
                spawn_one(&registry, pending).join().await;
            }
        }
    }
}

/// How a group drives a batch on its runtime.
#[derive(Clone, Copy)]
enum Driver {
    /// `block_on(batch)`: spawned from, and run on, the benchmark thread.
    CurrentThread,
    /// `block_on(spawn(batch))`: spawned from a worker, run on the workers.
    MultiThread,
}

impl Driver {
    fn runtime(self) -> Runtime {
        match self {
            Driver::CurrentThread => Builder::new_current_thread().build(),
            Driver::MultiThread => Builder::new_multi_thread().worker_threads(2).build(),
        }
        .expect("cannot build the tokio runtime")
    }

    /// Runs `fut` where this group spawns its batches.
    fn run<T: Send + 'static>(
        self,
        rt: &Runtime,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> T {
        match self {
            Driver::CurrentThread => rt.block_on(fut),
            Driver::MultiThread => rt
                .block_on(rt.spawn(fut))
                .expect("the batch driver panicked"),
        }
    }
}

/// What each variant's task sees from inside: `(async-stack task id,
/// async-stack spawn location, async-backtrace frames, inside await-tree)`.
type Seen = (Option<u64>, bool, usize, bool);

fn seen() -> Seen {
    let id = async_stack::current_task_id();
    let spawned_at = id.is_some_and(|id| {
        async_stack::dump()
            .task(id)
            .is_some_and(|t| t.spawned_at.is_some())
    });
    let ab_frames = async_backtrace::backtrace().map_or(0, |b| b.len());
    (
        id,
        spawned_at,
        ab_frames,
        await_tree::current_tree().is_some(),
    )
}

#[async_stack::traced_async]
async fn traced_probe() -> Seen {
    seen()
}

#[async_backtrace::framed]
async fn framed_probe() -> Seen {
    seen()
}

async fn plain_probe() -> Seen {
    seen()
}

/// Checks that every variant instruments a task spawned the way the bench
/// spawns it, on this group's runtime.
fn check_premises(driver: Driver, rt: &Runtime, registry: &Registry) {
    let registry = registry.clone();
    let seen = driver.run(rt, async move {
        let join = |h: JoinHandle<Seen>| async { h.await.expect("probe panicked") };
        [
            join(tokio::spawn(plain_probe())).await,
            join(tokio::spawn(traced_probe())).await,
            join(async_stack::tokio::spawn(traced_probe()).into_tokio()).await,
            join(tokio::spawn(framed_probe())).await,
            join(tokio::spawn(
                registry
                    .register_anonymous("probe")
                    .instrument(plain_probe()),
            ))
            .await,
        ]
    });
    let [untraced, traced, helper, ab, at] = seen;
    assert_eq!(untraced, (None, false, 0, false), "untraced");
    assert!(matches!(traced, (Some(_), false, 0, false)), "{traced:?}");
    assert!(matches!(helper, (Some(_), true, 0, false)), "{helper:?}");
    assert_eq!(ab, (None, false, 1, false), "async-backtrace");
    assert_eq!(at, (None, false, 0, true), "await-tree");
}

fn bench_group<M: Measurement>(
    c: &mut Criterion<M>,
    group_name: &str,
    driver: Driver,
    shape: Shape,
    polls_list: &[u32],
) {
    let rt = driver.runtime();
    let registry = Registry::new(await_tree::Config::default());
    check_premises(driver, &rt, &registry);
    let mut group: BenchmarkGroup<'_, M> = c.benchmark_group(group_name);
    for &polls in polls_list {
        let pending = polls - 1;
        for (name, spawn_one) in variants() {
            group.bench_with_input(BenchmarkId::new(name, polls), &pending, |b, &pending| {
                b.iter(|| {
                    driver.run(
                        &rt,
                        batch(spawn_one, registry.clone(), black_box(pending), shape),
                    )
                });
            });
        }
    }
    group.finish();
}

fn spawn_current_thread(c: &mut Criterion<BenchClock>) {
    bench_group(
        c,
        names::SPAWN_CURRENT_THREAD,
        Driver::CurrentThread,
        Shape::SpawnAllThenJoin,
        &SPAWN_POLLS,
    );
}

fn spawn_multi_thread(c: &mut Criterion<BenchClock>) {
    bench_group(
        c,
        names::SPAWN_MULTI_THREAD,
        Driver::MultiThread,
        Shape::SpawnAllThenJoin,
        &SPAWN_POLLS,
    );
}

fn spawn_join_current_thread(c: &mut Criterion<BenchClock>) {
    bench_group(
        c,
        names::SPAWN_JOIN_CURRENT_THREAD,
        Driver::CurrentThread,
        Shape::JoinAtOnce,
        &[1],
    );
}

criterion_group! {
    name = current_thread;
    config = benches::clock::criterion();
    targets = spawn_current_thread, spawn_join_current_thread
}
criterion_group! {
    name = multi_thread;
    config = benches::clock::criterion_process();
    targets = spawn_multi_thread
}
criterion_main!(current_thread, multi_thread);
