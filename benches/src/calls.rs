//! The task of the `calls` bench and of `root_poll_probe calls`: what a
//! call to an instrumented async fn costs when the callee completes
//! without suspending (a cache hit, a lock taken at once, a ready
//! channel), the most common call in most programs.
//!
//! The task root loops for ever: on each poll it calls [`CALLS_PER_POLL`]
//! (8) instrumented fns one after another, each of which awaits a ready
//! future once and returns, then it awaits a leaf that is `Pending` once
//! and wakes nobody. So every poll of the root makes eight whole frame
//! lives (created, first polled, its `.await` reached, completed,
//! dropped) under a registered root, and returns `Pending`.
//!
//! The variants differ only in instrumentation:
//!
//! - [`untraced`]: plain async fns. The baseline.
//! - [`with_async_stack`]: `#[async_stack::traced_async]` on the root and on
//!   the callee.
//! - [`with_async_backtrace`]: `#[async_backtrace::framed]` on both.
//! - [`with_await_tree`]: each call awaited through `instrument_await`, inside
//!   await-tree's task root ([`await_tree_root`]).
//!
//! The **wide task** (`wide_task`, `wide_root`) is the other shape of a
//! call: [`WIDE`] (128) calls awaited at once (a `join_all`, a fan-out),
//! each `Pending` once, more than a task's published stack holds. Each
//! poll of its root completes one round of calls and starts the next:
//! 128 frame lives, 66 of them hidden frames in async-stack (the root
//! and 62 calls fill its 63 slots).
//!
//! The root is boxed, as a runtime boxes a task, and polled
//! [`POLLS_PER_ROOT`](crate::root_poll::POLLS_PER_ROOT) times before a new
//! one is made, as in [`crate::root_poll`].

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::root_poll::Boxed;

/// Calls of the callee per poll of the root.
pub const CALLS_PER_POLL: u64 = 8;

/// `Pending` on its first poll, without waking anyone; `Ready` on the
/// next.
#[derive(Debug, Default)]
pub struct PendingOnce {
    polled: bool,
}

impl Future for PendingOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.polled, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Calls at once in the wide task: more than a published stack holds
/// ([`async_stack::task::STACK_CAPACITY`], 63), so that the calls past
/// it are the hidden frames a wide task has.
pub const WIDE: u64 = 128;

/// Polls its futures until all are ready and returns the sum of their
/// outputs, as `join_all` does for a few, with one allocation.
#[derive(Debug)]
pub struct JoinAll<F> {
    /// Never resized after [`JoinAll::new`], so the futures in it do not
    /// move while pinned.
    futures: Vec<Option<F>>,
    sum: u64,
}

impl<F: Future<Output = u64>> JoinAll<F> {
    pub fn new(futures: impl IntoIterator<Item = F>) -> Self {
        JoinAll {
            futures: futures.into_iter().map(Some).collect(),
            sum: 0,
        }
    }
}

impl<F: Future<Output = u64>> Future for JoinAll<F> {
    type Output = u64;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        // SAFETY: nothing below moves `futures` or its elements: the
        // vector is never resized, and an element is only polled in place
        // or dropped in place (set to `None`).
        let this = unsafe { self.get_unchecked_mut() };
        let mut pending = false;
        for slot in &mut this.futures {
            if let Some(f) = slot {
                // SAFETY: the element stays where it is until dropped (see
                // above), and `self` is pinned.
                match unsafe { Pin::new_unchecked(f) }.poll(cx) {
                    Poll::Ready(x) => {
                        this.sum = this.sum.wrapping_add(x);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(this.sum)
        }
    }
}

/// Defines `callee` and the boxed `root()` with the attributes given (the
/// same tokens on both), each call awaited through `$call`.
macro_rules! calls_task {
    ($(#[$attr:meta])* ; $call:ident => $awaited:expr) => {
        use super::*;

        /// The callee: awaits a ready future once and returns.
        $(#[$attr])*
        pub async fn callee(x: u64) -> u64 {
            std::future::ready(x.wrapping_mul(3)).await
        }

        /// The task: [`CALLS_PER_POLL`] calls, then `Pending` once, for
        /// ever.
        $(#[$attr])*
        pub async fn task() {
            let mut sum = 0u64;
            loop {
                for i in 0..CALLS_PER_POLL {
                    let $call = callee(i);
                    sum = sum.wrapping_add($awaited);
                }
                black_box(sum);
                PendingOnce::default().await;
            }
        }

        /// The task root, boxed.
        pub fn root() -> Boxed {
            Box::pin(task())
        }

        /// The callee of the wide task: `Pending` once, then returns.
        $(#[$attr])*
        pub async fn wide_callee(x: u64) -> u64 {
            PendingOnce::default().await;
            x
        }

        /// The wide task: [`WIDE`] calls at once, each `Pending` once, for
        /// ever. Each poll completes one round's calls and makes and first
        /// polls the next round's.
        $(#[$attr])*
        pub async fn wide_task() {
            loop {
                let sum = JoinAll::new((0..WIDE).map(|i| {
                    let $call = wide_callee(i);
                    async move { $awaited }
                }))
                .await;
                black_box(sum);
            }
        }

        /// The wide task's root, boxed.
        pub fn wide_root() -> Boxed {
            Box::pin(wide_task())
        }
    };
}

/// Plain async fns: the baseline.
pub mod untraced {
    calls_task!(; call => call.await);
}

/// `#[async_stack::traced_async]` on the root and the callee.
pub mod with_async_stack {
    calls_task!(#[async_stack::traced_async]; call => call.await);
}

/// `#[async_backtrace::framed]` on the root and the callee.
pub mod with_async_backtrace {
    calls_task!(#[async_backtrace::framed]; call => call.await);
}

/// Each call awaited as an await-tree node; the root needs
/// [`await_tree_root`] around it.
pub mod with_await_tree {
    use await_tree::InstrumentAwait;

    calls_task!(; call => call.instrument_await("callee").await);
}

/// await-tree's task root around [`with_await_tree::task`], registered under
/// `key` in `registry`, boxed.
pub fn await_tree_root(registry: &::await_tree::Registry, key: u64) -> Boxed {
    Box::pin(
        registry
            .register(key, "root")
            .instrument(with_await_tree::task()),
    )
}

/// The same around [`with_await_tree::wide_task`].
pub fn await_tree_wide_root(registry: &::await_tree::Registry, key: u64) -> Boxed {
    Box::pin(
        registry
            .register(key, "root")
            .instrument(with_await_tree::wide_task()),
    )
}
