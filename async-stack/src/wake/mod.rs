//! The wake graph: who wakes whom, and where each task's time goes.
//!
//! Recording is **off by default** and costs one relaxed load per poll and
//! per wake while off. Turn it on with [`record`]`(true)`, or for a whole
//! run with the environment variable `ASYNC_STACK_WAKES=1` (read when the
//! first task registers; `0` or unset leaves it off, anything else is
//! reported once on stderr and ignored).
//!
//! While recording, every task root's waker (the one the registry already
//! lends its task, see [`crate::task`]) notes:
//!
//! - **an edge** from the waking side to the woken task, with a count. The
//!   waking side is the task being polled on the waking thread, or, when
//!   none is: [`WakeSource::Runtime`] if the thread polls tasks (a
//!   runtime's I/O or timer driver, or code around `block_on`), else
//!   [`WakeSource::Thread`] (a thread that never polled a task: a plain
//!   `std::thread`, a blocking pool). A task waking itself during its own
//!   poll (a yield) is counted as a self-wake, not as an edge.
//! - **per task**: wakes, self-wakes, waker clones and drops, and a
//!   **lost-waker** flag, set when the task is pending, every clone of its
//!   waker has been dropped, and it was not woken: nothing can wake it.
//!   (The flag is cleared by the task's next poll or its end. A task whose
//!   executor passed it a second, different waker, which tokio never does,
//!   keeps a reference through that waker and is never flagged.)
//! - **time**, with [tokio-metrics]' definitions and names: poll duration
//!   (*busy*: inside `poll`), scheduled duration (from a wake to the poll
//!   that follows), idle duration (from `Pending` to the wake), and slow
//!   polls (over [`set_slow_poll_threshold`], 50 µs by default, as in
//!   tokio-metrics).
//!
//! **A node is a task as a dump shows it.** With the `tokio` feature, the
//! traced roots polled inside one tokio task (a plain
//! `tokio::spawn(async { tokio::join!(left(), right()) })` with `left`
//! and `right` traced) are one node, which carries the tokio task's id
//! ([`TaskNode::tokio_id`], the number `JoinHandle::id()` displays) and
//! the id of its first root. Edges from or to any of its roots are edges
//! of the node; a root woken by another root of the same tokio task was
//! woken from inside the task's own poll, and counts as a self-wake of the
//! node, not as an edge to itself. Counters are summed over the roots,
//! except scheduled and idle time (the largest root's) and the lost-waker
//! flag (set only if every live root has it); [`TaskNode`]'s fields say
//! why. Roots outside a tokio task are nodes of their own.
//!
//! A task is counted from its first poll after recording started. The
//! counters are statistics, written with relaxed atomics: a wake that
//! races the end of the poll it wakes is counted, but the boundary between
//! that poll's idle and scheduled time may move by the length of the race.
//!
//! [`graph()`] returns what was recorded, with [`WakeGraph::to_json`] and
//! [`WakeGraph::to_dot`]; [`WakeGraph::fold`] merges tasks by name or spawn
//! site; [`WakeGraph::reduce`] finds producer/consumer groups, and
//! [`Reduction::workload`] turns them into a workload file that
//! `cargo run --example replay` runs (see [`workload`]).
//!
//! ```
//! use async_stack::{TracedExt, wake};
//!
//! wake::record(true);
//! let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! rt.block_on(async {
//!     let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
//!     let consumer = async_stack::tokio::spawn_named("consumer", async move {
//!         while rx.recv().await.is_some() {}
//!     }.traced());
//!     let producer = async_stack::tokio::spawn_named("producer", async move {
//!         for i in 0..3 {
//!             tx.send(i).await.unwrap();
//!             tokio::task::yield_now().await;
//!         }
//!     }.traced());
//!     producer.await.unwrap();
//!     consumer.await.unwrap();
//! });
//! wake::record(false);
//! let g = wake::graph().fold(wake::Fold::Name);
//! let consumer = g.tasks.iter().find(|t| t.label == "consumer").unwrap();
//! let producer = g.tasks.iter().find(|t| t.label == "producer").unwrap();
//! assert!(g.edges.iter().any(|e| e.from == wake::WakeSource::Task(producer.id)
//!     && e.to == consumer.id && e.wakes >= 3));
//! assert!(g.to_dot().starts_with("digraph wakes {"));
//! ```
//!
//! [tokio-metrics]: https://docs.rs/tokio-metrics

use std::time::Duration;

use crate::task::probe;

mod emit;
mod graph;
mod node;
mod reduce;
pub mod workload;

pub use graph::{Fold, WakeEdge, WakeGraph, WakeSource};
pub use node::TaskNode;
pub use reduce::{Group, Member, ReduceOptions, Reduction};

/// The slow-poll threshold until [`set_slow_poll_threshold`] changes it:
/// 50 µs, tokio-metrics' default.
pub const DEFAULT_SLOW_POLL: Duration = probe::DEFAULT_SLOW_POLL;

/// Turns recording on or off for the whole process. Turning it off keeps
/// what was recorded; [`reset`] forgets it. While a debug endpoint's
/// `/debug/async/wakes` request records (feature `http`), recording stays
/// on until the request ends, then is as this call left it.
pub fn record(on: bool) {
    if on { probe::start() } else { probe::stop() }
}

/// Whether recording is on: by [`record`]`(true)`, `ASYNC_STACK_WAKES`, or
/// a debug endpoint's recording in progress.
pub fn is_recording() -> bool {
    probe::on()
}

/// Keeps recording on until the guard is dropped, without changing what
/// [`record`] set (the debug endpoint's timed recording).
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn hold_recording() -> probe::Holding {
    probe::hold()
}

/// Forgets everything recorded so far. Live tasks are counted again from
/// their next poll.
pub fn reset() {
    probe::clear();
}

/// Polls longer than `threshold` count as slow polls from now on.
pub fn set_slow_poll_threshold(threshold: Duration) {
    let ns = u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX);
    probe::SLOW_POLL_NS.store(ns, crate::shim::Ordering::Relaxed);
}

/// The graph recorded so far: every task seen while recording (live, and
/// up to 100,000 ended ones; older ended tasks are counted in
/// [`WakeGraph::dropped_tasks`]), and every edge between them. Reading it
/// blocks no task: it copies counters, and takes each thread's edge table
/// lock only for the copy.
pub fn graph() -> WakeGraph {
    graph::collect()
}
