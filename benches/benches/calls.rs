//! `calls`: what a call to an instrumented async fn costs when the callee
//! completes without suspending.
//!
//! `poll_depth` and `root_poll` measure frames that stay: every poll goes
//! down through the same live levels. Most calls in a program are not
//! like that: the callee returns on its first poll (a cache hit, a lock
//! taken at once, a ready channel), so each call pays for a whole frame
//! life: the frame made, first polled and placed in its task's published
//! stack, its `.await` recorded, its place given back, the frame dropped.
//! This bench measures that, the way a task pays it.
//!
//! # What runs
//!
//! The task of [`benches::calls`]: on each poll the root calls
//! [`CALLS_PER_POLL`] (8) instrumented fns in turn, each awaiting a ready
//! future once, then awaits a leaf that is `Pending` once and wakes
//! nobody. The root is boxed and polled [`POLLS_PER_ROOT`](root_poll::POLLS_PER_ROOT) (1,000) times
//! with [`Waker::noop`], from outside any instrumented frame, then dropped
//! and made again. One criterion iteration is **one poll of the root**
//! (`iter_custom`): eight calls.
//!
//! Variants, in one criterion group so they run in the same process:
//!
//! - `untraced`: plain async fns. The baseline.
//! - `async-stack`: `#[async_stack::traced_async]` on the root and the
//!   callee.
//! - `async-backtrace`: `#[async_backtrace::framed]` on both.
//! - `await-tree`: each call awaited through `instrument_await`, inside
//!   `Registry::register(..).instrument(..)`.
//!
//! # How to read it
//!
//! Times are the benchmark thread's CPU time ([`benches::clock`];
//! `BENCH_CLOCK=wall` for wall time), in ns per root poll. What a variant
//! adds to one call is
//!
//! ```text
//! added ns per call = (time(variant) - time(untraced)) / 8
//! ```
//!
//! which carries an eighth of the root's own per-poll cost
//! (`root_poll` at depth 1 measures that alone). `cargo run -p benches
//! --bin summary` prints it and the ratio async-stack / async-backtrace;
//! `target/release/instructions calls` gives the same in instructions.

use std::task::{Context, Waker};

use benches::calls::{self, CALLS_PER_POLL, WIDE};
use benches::clock::BenchClock;
use benches::names;
use benches::root_poll::{self, Boxed};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn calls(c: &mut Criterion<BenchClock>) {
    let registry = await_tree::Registry::new(await_tree::Config::default());
    check_premises(&registry);
    let mut key = 0;
    let mut variants =
        |group: &str,
         parameter: u64,
         roots: [fn() -> Boxed; 3],
         await_tree: fn(&await_tree::Registry, u64) -> Boxed| {
            let mut group = c.benchmark_group(group);
            let mut bench = |name: &str, make: &mut dyn FnMut() -> Boxed| {
                group.bench_function(BenchmarkId::new(name, parameter), |b| {
                    b.iter_custom(|iters| root_poll::poll_roots(iters, make));
                });
            };
            let [mut untraced, mut async_stack, mut async_backtrace] = roots;
            bench(names::UNTRACED, &mut untraced);
            bench(names::ASYNC_STACK, &mut async_stack);
            bench(names::ASYNC_BACKTRACE, &mut async_backtrace);
            bench(names::AWAIT_TREE, &mut || {
                key += 1;
                await_tree(&registry, key)
            });
            group.finish();
        };
    variants(
        names::CALLS,
        CALLS_PER_POLL,
        [
            calls::untraced::root,
            calls::with_async_stack::root,
            calls::with_async_backtrace::root,
        ],
        calls::await_tree_root,
    );
    variants(
        names::CALLS_WIDE,
        WIDE,
        [
            calls::untraced::wide_root,
            calls::with_async_stack::wide_root,
            calls::with_async_backtrace::wide_root,
        ],
        calls::await_tree_wide_root,
    );
}

/// Checks, outside the measurement, that each variant's root is its
/// library's task, alone between two polls: the calls of a poll have come
/// and gone (they completed, and left nothing in the task).
fn check_premises(registry: &await_tree::Registry) {
    let mut cx = Context::from_waker(Waker::noop());

    let mut root = calls::with_async_stack::root();
    for _ in 0..3 {
        assert!(root.as_mut().poll(&mut cx).is_pending());
    }
    let dump = async_stack::dump();
    let task = dump
        .tasks
        .iter()
        .find(|t| t.root.as_deref() == Some("benches::calls::with_async_stack::task"))
        .unwrap_or_else(|| panic!("async-stack: the root is a task in\n{dump}"));
    let frames: Vec<&str> = task.frames.iter().map(|f| &*f.function).collect();
    assert_eq!(
        frames,
        ["benches::calls::with_async_stack::task"],
        "async-stack"
    );
    assert_eq!((task.polls, task.hidden_frames), (3, 0), "async-stack");
    drop(root);

    let mut root = calls::with_async_backtrace::root();
    assert!(root.as_mut().poll(&mut cx).is_pending());
    let tree = async_backtrace::taskdump_tree(false);
    assert_eq!(
        (
            tree.matches("with_async_backtrace::task").count(),
            tree.matches("callee").count()
        ),
        (1, 0),
        "async-backtrace: the root alone in\n{tree}"
    );
    drop(root);

    let mut root = calls::await_tree_root(registry, u64::MAX);
    assert!(root.as_mut().poll(&mut cx).is_pending());
    let tree = registry
        .get(u64::MAX)
        .expect("await-tree: the root is registered")
        .to_string();
    assert!(
        !tree.contains("callee"),
        "await-tree: no call left in\n{tree}"
    );
    drop(root);

    // The wide task: after its first poll, its root and every call in
    // async-stack's dump, those past the published stack's capacity
    // counted hidden; and each peer's tree holds the calls too.
    let mut root = calls::with_async_stack::wide_root();
    assert!(root.as_mut().poll(&mut cx).is_pending());
    let dump = async_stack::dump();
    let task = dump
        .tasks
        .iter()
        .find(|t| t.root.as_deref() == Some("benches::calls::with_async_stack::wide_task"))
        .unwrap_or_else(|| panic!("async-stack: the wide root is a task in\n{dump}"));
    let callees = task
        .frames
        .iter()
        .filter(|f| f.function == "benches::calls::with_async_stack::wide_callee")
        .count();
    let shown = async_stack::task::STACK_CAPACITY - 1;
    assert_eq!(
        (task.frames.len(), callees, task.hidden_frames as usize),
        (shown + 1, shown, WIDE as usize - shown),
        "async-stack"
    );
    drop(root);

    let mut root = calls::with_async_backtrace::wide_root();
    assert!(root.as_mut().poll(&mut cx).is_pending());
    let tree = async_backtrace::taskdump_tree(false);
    // It folds identical siblings into one line, with their count.
    assert!(
        tree.contains(&format!(
            "{WIDE}x benches::calls::with_async_backtrace::wide_callee"
        )),
        "async-backtrace: every call in\n{tree}"
    );
    drop(root);

    let mut root = calls::await_tree_wide_root(registry, u64::MAX - 1);
    assert!(root.as_mut().poll(&mut cx).is_pending());
    let tree = registry
        .get(u64::MAX - 1)
        .expect("await-tree: the wide root is registered")
        .to_string();
    assert_eq!(
        tree.matches("callee").count(),
        WIDE as usize,
        "await-tree: every call in\n{tree}"
    );
    drop(root);
}

criterion_group! {
    name = benches;
    config = benches::clock::criterion();
    targets = calls
}
criterion_main!(benches);
