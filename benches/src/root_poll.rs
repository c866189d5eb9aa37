//! The boxed chains of the `root_poll` bench and the `root_poll_probe`
//! binary: what a task root costs on every poll, once it is registered.
//!
//! A chain of depth `D` is `lD -> ... -> l1 -> leaf`: `D` async fns, each
//! awaiting the next one **boxed** (`Pin<Box<dyn Future + Send>>`, as
//! recursion, `async-trait` and type-erased layers box them), the last
//! awaiting a boxed [`pending`] leaf. `lD` is the task root: the caller
//! boxes it too (as a runtime boxes a task) and polls it with a no-op
//! waker, from outside any instrumented frame. The leaf is `Pending` on
//! every poll and wakes nobody, so every poll of the root goes down through
//! all `D` levels and back, and the root stays registered between polls:
//! the steady state of a task waiting on I/O.
//!
//! The variants differ only in instrumentation (the levels and the leaf
//! are the same, boxing included):
//!
//! - [`untraced`]: plain async fns. The baseline.
//! - [`async_stack`]: `#[async_stack::traced_async]` on every level; `lD`,
//!   polled with no traced frame active, is async-stack's task root.
//! - [`async_backtrace`]: `#[async_backtrace::framed]` on every level; `lD`
//!   is async-backtrace's task root.
//! - [`await_tree`]: every level awaits the next through
//!   `.instrument_await("lK")`, and the root is run inside
//!   `Registry::register(..).instrument(..)` (await-tree's task root,
//!   added by the caller: [`await_tree_root`]).
//!
//! [`ROOT_POLL_DEPTHS`] are the depths measured, [`POLLS_PER_ROOT`] the
//! polls of each root before it is dropped.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use crate::clock;

/// The depths of the `root_poll` chains: the root alone, and eight levels.
pub const ROOT_POLL_DEPTHS: [u32; 2] = [1, 8];

/// Polls of each root before it is dropped and a new one is made.
pub const POLLS_PER_ROOT: u64 = 1000;

/// A boxed, type-erased future, as every level of a chain awaits its
/// callee.
pub type Boxed = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Polls `iters` times in all, a new root from `make` every
/// [`POLLS_PER_ROOT`] polls, each with [`Waker::noop`] through a
/// `black_box`ed `Pin<&mut dyn Future>`, asserting it is `Pending`; the
/// time taken on the benchmark clock. The loop of the `root_poll` and
/// `calls` benches and of `root_poll_probe`.
pub fn poll_roots(iters: u64, make: &mut dyn FnMut() -> Boxed) -> Duration {
    let mut cx = Context::from_waker(Waker::noop());
    let start = clock::now();
    let mut left = iters;
    while left > 0 {
        let polls = left.min(POLLS_PER_ROOT);
        let mut root = make();
        let mut fut: Pin<&mut (dyn Future<Output = ()> + Send)> = black_box(root.as_mut());
        for _ in 0..polls {
            assert!(fut.as_mut().poll(&mut cx).is_pending());
        }
        drop(root);
        left -= polls;
    }
    clock::now().saturating_sub(start)
}

/// The leaf of every chain: `Pending` on every poll, never wakes anyone.
pub fn pending() -> std::future::Pending<()> {
    std::future::pending()
}

/// Defines `root(depth)`, the boxed root of a chain of depth 1 or 8 of the
/// levels in scope.
macro_rules! roots {
    () => {
        /// The task root of the chain of `depth` levels (1 or 8), boxed.
        pub fn root(depth: u32) -> $crate::root_poll::Boxed {
            match depth {
                1 => Box::pin(l1()),
                8 => Box::pin(l8()),
                _ => panic!("no root_poll chain of depth {depth}"),
            }
        }
    };
}

/// Plain async fns: the baseline.
pub mod untraced {
    use super::{Boxed, pending};

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            /// One level: awaits the level below, boxed.
            pub async fn $name() {
                let callee: Boxed = Box::pin($callee());
                callee.await
            }
        };
    }
    crate::chain!(8, level, pending);
    roots!();
}

/// `#[async_stack::traced_async]` on every level.
pub mod async_stack {
    use super::{Boxed, pending};

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            /// One level: awaits the level below, boxed.
            #[async_stack::traced_async]
            pub async fn $name() {
                let callee: Boxed = Box::pin($callee());
                callee.await
            }
        };
    }
    crate::chain!(8, level, pending);
    roots!();
}

/// `#[async_backtrace::framed]` on every level.
pub mod async_backtrace {
    use super::{Boxed, pending};

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            /// One level: awaits the level below, boxed.
            #[async_backtrace::framed]
            pub async fn $name() {
                let callee: Boxed = Box::pin($callee());
                callee.await
            }
        };
    }
    crate::chain!(8, level, pending);
    roots!();
}

/// Every level awaits the next through `instrument_await`; the root needs
/// [`await_tree_root`] around it.
pub mod await_tree {
    use await_tree::InstrumentAwait;

    use super::{Boxed, pending};

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            /// One level: awaits the level below, boxed, as a tree node.
            pub async fn $name() {
                let callee: Boxed = Box::pin($callee());
                callee.instrument_await(stringify!($name)).await
            }
        };
    }
    crate::chain!(8, level, pending);
    roots!();
}

/// await-tree's task root around [`await_tree::root`]`(depth)`, registered
/// under `key` in `registry`, boxed.
pub fn await_tree_root(registry: &::await_tree::Registry, key: u64, depth: u32) -> Boxed {
    Box::pin(
        registry
            .register(key, "root")
            .instrument(await_tree::root(depth)),
    )
}
