//! `poll_depth`: the added cost of one instrumented level on one poll.
//!
//! # What runs
//!
//! A chain `root -> lN -> ... -> l1 -> leaf` of nested async fns, for
//! N = 1, 8 and 32. The leaf ([`benches::YieldN`]) is `Pending` 1000 times,
//! so every poll of `root` goes down through all N levels. One iteration
//! creates the future, polls it to completion (1001 polls) with a bare loop
//! and a no-op waker ([`benches::poll_to_completion`], no runtime), and drops
//! it. Every level is written out by [`benches::chain!`]: nothing is boxed in
//! any variant.
//!
//! Variants, in one criterion group so they run in the same process:
//!
//! - `untraced`: plain async fns. The baseline.
//! - `async-stack`: `#[async_stack::traced_async]` on `root` and every level.
//!   `root` is polled with no traced frame active, so it is the task root
//!   (registered on its first poll, once per future); `l1..lN` are ordinary
//!   frames, which is what this bench is about.
//! - `async-stack .traced()`: plain async fns, each awaiting its callee
//!   wrapped by `async_stack::TracedExt::traced()` (the same `Traced` future
//!   with no await-site records, and around the callee's generator rather
//!   than inside it).
//! - `async-backtrace`: `#[async_backtrace::framed]` on `root` and every
//!   level; `root` is likewise its task root.
//! - `control: link only`: a wrapper written here, around the same plain
//!   async fns as `.traced()`, that does the least any frame recording must:
//!   store the thread's current level as its parent, make itself current,
//!   poll, and restore the parent. No task, no state, no await sites, no
//!   unwinding guard. It is the floor a recording wrapper can reach in this
//!   bench, not a product.
//! - `await-tree`: every level awaits its callee through
//!   `instrument_await("lK")`, and the whole chain runs inside
//!   `Registry::register(..).instrument(..)` (await-tree's root: without it
//!   `instrument_await` records nothing).
//!
//! # How to read it
//!
//! Times are the benchmark thread's CPU time ([`benches::clock`];
//! `BENCH_CLOCK=wall` for wall time), so other processes on the machine
//! inflate them less.
//!
//! Criterion's time is per future, i.e. per 1001 polls. The cost of one
//! level on one poll is
//!
//! ```text
//! per level per poll = (time(variant, N) - time(untraced, N)) / (N * 1001)
//! ```
//!
//! That figure also carries the root's own per-poll cost and its one-off
//! registration, spread over the N levels, so it overstates the per-level
//! cost most at N = 1. The marginal cost of a level,
//! `(time(v, 32) - time(v, 8) - (time(untraced, 32) - time(untraced, 8))) / (24 * 1001)`,
//! has neither. `cargo run -p benches --bin summary` prints both, and the
//! ratio async-stack / async-backtrace; BENCHMARKS.md holds the last run.

use std::hint::black_box;

use benches::clock::BenchClock;
use benches::{DEPTHS, PENDING_PER_FUTURE, POLLS_PER_FUTURE, names, poll_to_completion};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// The roots of the chains of depth 1, 8 and 32, with the variant's
/// instrumentation (or none) on the root itself. One root per depth, so
/// that each root's state and stack frame are sized for its own chain.
macro_rules! roots {
    ($(#[$attr:meta])*) => {
        $(#[$attr])*
        pub async fn root_1(pending: u32) {
            l1(pending).await
        }
        $(#[$attr])*
        pub async fn root_8(pending: u32) {
            l8(pending).await
        }
        $(#[$attr])*
        pub async fn root_32(pending: u32) {
            l32(pending).await
        }
    };
}

/// The same roots for a variant that wraps a plain async block in
/// `$wrap` (a wrapper future type and the call that builds it).
macro_rules! wrapped_roots {
    ($ty:ident, |$fut:ident| $wrap:expr) => {
        pub fn root_1(pending: u32) -> $ty<impl Future<Output = ()>> {
            let $fut = async move { l1(pending).await };
            $wrap
        }
        pub fn root_8(pending: u32) -> $ty<impl Future<Output = ()>> {
            let $fut = async move { l8(pending).await };
            $wrap
        }
        pub fn root_32(pending: u32) -> $ty<impl Future<Output = ()>> {
            let $fut = async move { l32(pending).await };
            $wrap
        }
    };
}

mod untraced {
    use benches::yield_leaf;

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            pub async fn $name(pending: u32) {
                $callee(pending).await
            }
        };
    }
    benches::chain!(32, level, yield_leaf);
    roots!();
}

mod async_stack_traced {
    use benches::yield_leaf;

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            #[async_stack::traced_async]
            pub async fn $name(pending: u32) {
                $callee(pending).await
            }
        };
    }
    benches::chain!(32, level, yield_leaf);
    roots!(#[async_stack::traced_async]);
}

mod async_stack_traced_ext {
    use async_stack::{Traced, TracedExt};
    use benches::yield_leaf;

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            pub fn $name(pending: u32) -> Traced<impl Future<Output = ()>> {
                async move { $callee(pending).await }.traced()
            }
        };
    }
    benches::chain!(32, level, yield_leaf);
    wrapped_roots!(Traced, |fut| fut.traced());
}

mod async_backtrace_framed {
    use benches::yield_leaf;

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            #[async_backtrace::framed]
            pub async fn $name(pending: u32) {
                $callee(pending).await
            }
        };
    }
    benches::chain!(32, level, yield_leaf);
    roots!(#[async_backtrace::framed]);
}

mod await_tree_instrumented {
    use await_tree::InstrumentAwait;
    use benches::yield_leaf;

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            pub async fn $name(pending: u32) {
                $callee(pending).instrument_await(stringify!($name)).await
            }
        };
    }
    benches::chain!(32, level, yield_leaf);
    roots!();
}

mod control {
    use std::cell::Cell;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use benches::yield_leaf;

    thread_local! {
        static CURRENT: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
    }

    /// Links itself under the thread's current level for each poll.
    pub struct Link<F> {
        inner: F,
        parent: Cell<*const ()>,
    }

    impl<F: Future> Future for Link<F> {
        type Output = F::Output;

        #[inline(always)]
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            // SAFETY: nothing is moved out of `this`: `inner` is only
            // re-pinned below and `parent` is a `Cell` written in place.
            let this = unsafe { self.get_unchecked_mut() };
            // SAFETY: `inner` is structurally pinned: `Link` never moves it,
            // has no `Drop`, and is `Unpin` only when `F` is.
            let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
            // SAFETY: a `const`-initialised thread-local without destructor
            // lives as long as its thread, which runs this poll.
            let current: &Cell<*const ()> = CURRENT.with(|c| unsafe { &*(c as *const Cell<_>) });
            let parent = current.get();
            this.parent.set(parent);
            current.set(&this.parent as *const Cell<*const ()> as *const ());
            let out = inner.poll(cx);
            current.set(parent);
            out
        }
    }

    fn link<F: Future>(inner: F) -> Link<F> {
        Link {
            inner,
            parent: Cell::new(std::ptr::null()),
        }
    }

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            pub fn $name(pending: u32) -> Link<impl Future<Output = ()>> {
                link(async move { $callee(pending).await })
            }
        };
    }
    benches::chain!(32, level, yield_leaf);
    wrapped_roots!(Link, |fut| link(fut));
}

/// Benchmarks the chain of depth `$depth` of variant module `$m` under
/// `$name`; `|$fut| $wrap` (default: the root itself) turns the root
/// future into the future that is run.
macro_rules! bench_chain {
    ($group:expr, $name:expr, $depth:expr, $m:ident $(, |$fut:ident| $wrap:expr)?) => {
        match $depth {
            1 => bench_chain!(@one $group, $name, 1, $m::root_1 $(, |$fut| $wrap)?),
            8 => bench_chain!(@one $group, $name, 8, $m::root_8 $(, |$fut| $wrap)?),
            32 => bench_chain!(@one $group, $name, 32, $m::root_32 $(, |$fut| $wrap)?),
            depth => unreachable!("no chain of depth {depth}"),
        }
    };
    (@one $group:expr, $name:expr, $depth:literal, $root:path) => {
        bench_chain!(@one $group, $name, $depth, $root, |fut| fut)
    };
    (@one $group:expr, $name:expr, $depth:literal, $root:path, |$fut:ident| $wrap:expr) => {
        $group.bench_function(BenchmarkId::new($name, $depth), |b| {
            b.iter(|| {
                let $fut = $root(black_box(PENDING_PER_FUTURE));
                run($wrap)
            })
        })
    };
}

fn poll_depth(c: &mut Criterion<BenchClock>) {
    let registry = await_tree::Registry::new(await_tree::Config::default());
    let mut group = c.benchmark_group(names::POLL_DEPTH);
    for depth in DEPTHS {
        bench_chain!(group, names::UNTRACED, depth, untraced);
        bench_chain!(group, names::ASYNC_STACK, depth, async_stack_traced);
        bench_chain!(
            group,
            names::ASYNC_STACK_TRACED_EXT,
            depth,
            async_stack_traced_ext
        );
        bench_chain!(group, names::CONTROL, depth, control);
        bench_chain!(group, names::ASYNC_BACKTRACE, depth, async_backtrace_framed);
        bench_chain!(
            group,
            names::AWAIT_TREE,
            depth,
            await_tree_instrumented,
            |fut| { registry.register(names::POLL_DEPTH, "root").instrument(fut) }
        );
    }
    group.finish();
}

/// Polls one chain to completion and checks it took the expected polls.
fn run(fut: impl Future<Output = ()>) {
    let ((), polls) = poll_to_completion(fut);
    assert_eq!(polls, POLLS_PER_FUTURE);
}

criterion_group! {
    name = benches;
    config = benches::clock::criterion();
    targets = poll_depth
}
criterion_main!(benches);
