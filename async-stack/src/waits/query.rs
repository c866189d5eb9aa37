//! What a task waits for, for the dump's line under the awaiting frame

//! (`waiting for Mutex created at ..., held by task 7 (...)`).
//!
//! One call reads every resource that has waits, without blocking any
//! task beyond a copy of each one's short lists: one load while nothing is
//! listed, and one more per listed resource without a wait (an idle lock
//! that had some), which it skips.

// The dump (a reader above this layer) is to call these; until it does,
// only the tests do.
#![cfg_attr(any(not(test), async_stack_loom), allow(dead_code))]

use std::collections::HashMap;
use std::panic::Location;

use crate::waits::resource::{Ask, Kind, Registry};

/// A holder of the resource a task waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Holder {
    /// The holding task (0: outside any traced root).
    pub(crate) task: u64,
    pub(crate) acquired_at: &'static Location<'static>,
    /// When it acquired it (ms on [`crate::clock::now_ms`]'s scale).
    pub(crate) since_ms: u64,
    pub(crate) permits: u32,
}

/// What a task waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WaitingFor {
    pub(crate) kind: Kind,
    pub(crate) created_at: &'static Location<'static>,
    /// The `lock()` / `acquire()` call it waits at (`None` for a
    /// `JoinHandle`).
    pub(crate) waiting_at: Option<&'static Location<'static>>,
    /// Since when it waits (ms on [`crate::clock::now_ms`]'s scale).
    pub(crate) since_ms: u64,
    /// Permits asked (1 for a lock; 0 for a `JoinHandle`).
    pub(crate) permits: u32,
    /// The holders, exclusive first; empty for a `JoinHandle`.
    pub(crate) holders: Vec<Holder>,
    /// For a `JoinHandle`: the tokio id of the awaited task.
    pub(crate) tokio_task: Option<u64>,
}

/// The first wait of each waiting task, by task id.
pub(crate) fn waiting_tasks(registry: &Registry) -> HashMap<u64, WaitingFor> {
    let mut out = HashMap::new();
    if registry.is_empty() {
        return out;
    }
    for (_, copy) in registry.copies() {
        let holders: Vec<Holder> = copy
            .exclusive
            .iter()
            .chain(&copy.holds)
            .map(|h| Holder {
                task: h.task,
                acquired_at: h.at,
                since_ms: h.since_ms,
                permits: h.permits,
            })
            .collect();
        for w in copy.waits.iter().filter(|w| w.task != 0) {
            out.entry(w.task).or_insert_with(|| WaitingFor {
                kind: copy.kind,
                created_at: copy.created_at,
                waiting_at: w.at,
                since_ms: w.since_ms,
                permits: match w.ask {
                    Ask::Exclusive => 1,
                    Ask::Shared(n) => n,
                    Ask::Finish => 0,
                },
                holders: holders.clone(),
                tokio_task: copy.target,
            });
        }
    }
    out
}

/// What task `task` waits for, if it waits for a wrapped resource.
pub(crate) fn waiting_for(registry: &Registry, task: u64) -> Option<WaitingFor> {
    if task == 0 || registry.is_empty() {
        return None;
    }
    waiting_tasks(registry).remove(&task)
}
