//! The four variants' populations: the chains, their leaf, and how each
//! variant spawns a chain as a task and checks that its library sees it.
//!
//! The chains are one [`crate::chain!`] per variant, from a per-level macro
//! that differs only in the instrumentation; every chain defines `l1` to
//! `l16`, so any depth up to 16 is a distinct, statically nested type.

use std::future::Future;

/// How a variant turns a chain's root future into a task, and how it
/// checks that its library sees the population.
pub(crate) trait Instrumentation {
    /// Spawns `root` (task number `key`) on the current runtime; returns
    /// `size_of` the future handed to `tokio::spawn`.
    fn spawn<F>(&self, key: usize, root: F) -> usize
    where
        F: Future<Output = ()> + Send + 'static;

    /// Checks that the library sees `live` tasks of `depth` levels.
    fn check(&self, depth: usize, live: usize) -> Result<(), String>;
}

/// Spawns `fut` on the current runtime and detaches it; returns its size.
fn spawn_detached<F>(fut: F) -> usize
where
    F: Future<Output = ()> + Send + 'static,
{
    let size = std::mem::size_of_val(&fut);
    drop(tokio::spawn(fut));
    size
}

/// [`super::Variant::Control`].
pub(crate) struct Control;

impl Instrumentation for Control {
    fn spawn<F>(&self, _key: usize, root: F) -> usize
    where
        F: Future<Output = ()> + Send + 'static,
    {
        spawn_detached(root)
    }

    fn check(&self, _depth: usize, _live: usize) -> Result<(), String> {
        let traced = async_stack::dump().tasks.len() + async_backtrace::tasks().count();
        match traced {
            0 => Ok(()),
            n => Err(format!("control: {n} instrumented tasks")),
        }
    }
}

/// [`super::Variant::AsyncStack`].
pub(crate) struct AsyncStack;

impl Instrumentation for AsyncStack {
    fn spawn<F>(&self, _key: usize, root: F) -> usize
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(async_stack::tokio::spawn(root));
        // What the helper hands to `tokio::spawn`.
        std::mem::size_of::<async_stack::task::Spawned<F>>()
    }

    fn check(&self, depth: usize, live: usize) -> Result<(), String> {
        let dump = async_stack::dump();
        if dump.tasks.len() != live {
            return Err(format!(
                "async-stack: {} tasks, expected {live}",
                dump.tasks.len()
            ));
        }
        let bad = dump.tasks.iter().find(|t| {
            t.state != async_stack::TaskState::Idle
                || t.frames.len() != depth
                || t.spawned_at.is_none()
        });
        match bad {
            None => Ok(()),
            Some(t) => Err(format!(
                "async-stack: task {} is {:?} with {} frames (expected idle, {depth} frames, \
                 a spawn location)",
                t.id,
                t.state,
                t.frames.len()
            )),
        }
    }
}

/// [`super::Variant::AsyncBacktrace`].
pub(crate) struct AsyncBacktrace;

impl Instrumentation for AsyncBacktrace {
    fn spawn<F>(&self, _key: usize, root: F) -> usize
    where
        F: Future<Output = ()> + Send + 'static,
    {
        spawn_detached(root)
    }

    fn check(&self, depth: usize, live: usize) -> Result<(), String> {
        let tasks = async_backtrace::tasks().count();
        if tasks != live {
            return Err(format!("async-backtrace: {tasks} tasks, expected {live}"));
        }
        let tree = async_backtrace::tasks()
            .next()
            .map(|t| t.pretty_tree(false))
            .unwrap_or_default();
        match tree.matches("╼ ").count() {
            frames if frames == depth => Ok(()),
            frames => Err(format!(
                "async-backtrace: a task of {frames} frames, expected {depth}:\n{tree}"
            )),
        }
    }
}

/// [`super::Variant::AwaitTree`], with the registry its roots register in.
pub(crate) struct AwaitTree(pub(crate) await_tree::Registry);

impl Instrumentation for AwaitTree {
    fn spawn<F>(&self, key: usize, root: F) -> usize
    where
        F: Future<Output = ()> + Send + 'static,
    {
        spawn_detached(self.0.register(key, "root").instrument(root))
    }

    fn check(&self, depth: usize, live: usize) -> Result<(), String> {
        let trees = self.0.collect_all().len();
        if trees != live {
            return Err(format!("await-tree: {trees} trees, expected {live}"));
        }
        // Rendering all 100,000 trees would take longer than the rest of
        // the probe: the first and the last task stand for the others.
        for key in [0, live - 1] {
            let tree = self.0.get(key).map(|t| t.to_string()).unwrap_or_default();
            if tree.lines().count() != depth {
                return Err(format!(
                    "await-tree: tree {key} does not have {depth} nodes:\n{tree}"
                ));
            }
        }
        Ok(())
    }
}

/// One level of [`control_chain`]: awaits the level below.
macro_rules! plain_level {
    ($name:ident => $callee:ident) => {
        /// One level: awaits the level below.
        pub async fn $name() {
            $callee().await
        }
    };
}

/// One level of [`async_stack_chain`].
macro_rules! traced_level {
    ($name:ident => $callee:ident) => {
        /// One traced level: awaits the level below.
        #[async_stack::traced_async]
        pub async fn $name() {
            $callee().await
        }
    };
}

/// One level of [`async_backtrace_chain`].
macro_rules! framed_level {
    ($name:ident => $callee:ident) => {
        /// One framed level: awaits the level below.
        #[async_backtrace::framed]
        pub async fn $name() {
            $callee().await
        }
    };
}

/// One level of [`await_tree_chain`]: `l1` awaits the leaf plainly (the
/// task's root span is its first node), every other level awaits the one
/// below as a span, so a chain of depth `d` makes `d` nodes.
macro_rules! instrumented_level {
    (l1 => $callee:ident) => {
        plain_level!(l1 => $callee);
    };
    ($name:ident => $callee:ident) => {
        /// One level: awaits the level below as an await-tree span.
        pub async fn $name() {
            await_tree::InstrumentAwait::instrument_await($callee(), stringify!($callee)).await
        }
    };
}

/// [`super::Variant::Control`]'s chain, `l1` to `l16`.
pub mod control_chain {
    use crate::park;
    crate::chain!(16, plain_level, park);
}

/// [`super::Variant::AsyncStack`]'s chain, `l1` to `l16`.
pub mod async_stack_chain {
    use crate::park;
    crate::chain!(16, traced_level, park);
}

/// [`super::Variant::AsyncBacktrace`]'s chain, `l1` to `l16`.
pub mod async_backtrace_chain {
    use crate::park;
    crate::chain!(16, framed_level, park);
}

/// [`super::Variant::AwaitTree`]'s chain, `l1` to `l16`.
pub mod await_tree_chain {
    use crate::park;
    crate::chain!(16, instrumented_level, park);
}
