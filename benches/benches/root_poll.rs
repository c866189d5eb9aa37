//! `root_poll`: what a registered task root costs on every poll.
//!
//! `poll_depth` divides its cost by the levels and compares depths, so a
//! regression on the root's own per-poll path hides there (the marginal
//! level cancels it). This bench measures the whole poll of a task, root
//! and levels together, the way an executor pays it.
//!
//! # What runs
//!
//! The chains of [`benches::root_poll`]: `lD -> ... -> l1 -> leaf`, each
//! level awaiting the next one boxed (`Pin<Box<dyn Future + Send>>`), the
//! leaf `Pending` on every poll without waking anyone, for D = 1 (the root
//! alone) and D = 8. The root is boxed and polled [`POLLS_PER_ROOT`](root_poll::POLLS_PER_ROOT)
//! (1,000) times with [`Waker::noop`] through a `black_box`ed
//! `Pin<&mut dyn Future>`, from outside any instrumented frame, then
//! dropped, and a new root is made; one criterion iteration is **one poll
//! of the root** (`iter_custom`). Making, registering and dropping a root
//! are in the time, spread over its 1,000 polls (the `root` bench measures
//! them alone).
//!
//! Variants, in one criterion group so they run in the same process:
//!
//! - `untraced`: plain async fns. The baseline.
//! - `async-stack`: `#[async_stack::traced_async]` on every level; the
//!   outermost is async-stack's task root.
//! - `async-backtrace`: `#[async_backtrace::framed]` on every level; the
//!   outermost is its task root.
//! - `await-tree`: `instrument_await` on every level, inside
//!   `Registry::register(..).instrument(..)`, its task root.
//!
//! # How to read it
//!
//! Times are the benchmark thread's CPU time ([`benches::clock`];
//! `BENCH_CLOCK=wall` for wall time), in ns per root poll. What a variant
//! adds to every poll of a task is
//!
//! ```text
//! added ns per root poll = time(variant, D) - time(untraced, D)
//! ```
//!
//! At D = 1 that is the root's own per-poll cost (entry, exit, the lent
//! waker) with one level; at D = 8 it adds seven child levels. `cargo run
//! -p benches --bin summary` prints both, the ratio async-stack /
//! async-backtrace and the target (at depth 8, at most 0.5× what
//! async-backtrace adds); BENCHMARKS.md holds the last run.

use std::task::{Context, Waker};

use benches::clock::BenchClock;
use benches::names;
use benches::root_poll::{self, Boxed, ROOT_POLL_DEPTHS};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn root_poll(c: &mut Criterion<BenchClock>) {
    let registry = await_tree::Registry::new(await_tree::Config::default());
    check_premises(&registry);
    let mut group = c.benchmark_group(names::ROOT_POLL);
    for depth in ROOT_POLL_DEPTHS {
        let mut bench = |name: &str, make: &mut dyn FnMut() -> Boxed| {
            group.bench_function(BenchmarkId::new(name, depth), |b| {
                b.iter_custom(|iters| root_poll::poll_roots(iters, make));
            });
        };
        bench(names::UNTRACED, &mut || root_poll::untraced::root(depth));
        bench(names::ASYNC_STACK, &mut || {
            root_poll::async_stack::root(depth)
        });
        bench(names::ASYNC_BACKTRACE, &mut || {
            root_poll::async_backtrace::root(depth)
        });
        let mut key = 0;
        bench(names::AWAIT_TREE, &mut || {
            key += 1;
            root_poll::await_tree_root(&registry, key, depth)
        });
    }
    group.finish();
}

/// Checks, outside the measurement, that each variant's root is its
/// library's task with one frame (or tree node) per level while polled:
/// the leaf is replaced by nothing, so the premise is read from a dump
/// taken between two polls.
fn check_premises(registry: &await_tree::Registry) {
    let mut cx = Context::from_waker(Waker::noop());
    for depth in ROOT_POLL_DEPTHS {
        let d = depth as usize;
        let mut root = root_poll::async_stack::root(depth);
        assert!(root.as_mut().poll(&mut cx).is_pending());
        let dump = async_stack::dump();
        let frames = dump
            .tasks
            .iter()
            .find(|t| {
                t.frames
                    .first()
                    .is_some_and(|f| f.function.ends_with(&format!("::l{depth}")))
            })
            .map(|t| t.frames.len());
        assert_eq!(frames, Some(d), "async-stack: one task, {d} frames");
        drop(root);

        let mut root = root_poll::async_backtrace::root(depth);
        assert!(root.as_mut().poll(&mut cx).is_pending());
        let tree = async_backtrace::taskdump_tree(false);
        assert_eq!(
            tree.matches("root_poll::async_backtrace::l").count(),
            d,
            "async-backtrace: {d} frames in\n{tree}"
        );
        drop(root);

        let mut root = root_poll::await_tree_root(registry, u64::MAX, depth);
        assert!(root.as_mut().poll(&mut cx).is_pending());
        let tree = registry
            .get(u64::MAX)
            .expect("await-tree: the root is registered")
            .to_string();
        // The root span, and one node per level but the innermost (whose
        // callee is the plain leaf, awaited as a node too).
        assert_eq!(
            tree.lines().count(),
            d + 1,
            "await-tree: root + {d} nodes in\n{tree}"
        );
        drop(root);
    }
}

criterion_group! {
    name = benches;
    config = benches::clock::criterion();
    targets = root_poll
}
criterion_main!(benches);
