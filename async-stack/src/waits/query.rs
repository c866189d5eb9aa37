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

use crate::record::location::SourceLocation;
use crate::record::site::{AwaitSite, await_site_by_id};
use crate::task::stack::CopiedFrame;
use crate::waits::resource::{Ask, Kind, Registry};
use crate::waits::waiter::{NOT_AT_AWAIT, awaited_site, suspended_in};

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
    /// The `.await` that polled the acquire future or the `JoinHandle`, if
    /// known. The wait holds only while the frame that was there still is
    /// (see [`WaitingFor::holds_in`]).
    pub(crate) awaiting: Option<SourceLocation>,
    /// That `.await` and that frame, as the wait records them
    /// ([`Waiter::awaiting`](crate::waits::waiter::Waiter); `0`: not
    /// known).
    pub(crate) frame: u64,
    /// That frame's ancestry ([`Waiter::path`](crate::waits::waiter::Waiter);
    /// `0`: not known).
    pub(crate) path: u64,
}

impl WaitingFor {
    /// Whether the wait holds for a root whose published stack reads as
    /// `frames`: one polled at a known `.await` while the frame that was
    /// there still is (an acquire future or a handle raced in `select!`
    /// and kept while its task went on is not awaited any more, nor is it
    /// by another frame that reached the same `.await`, nor by a frame
    /// whose caller went on to another `.await`), and one polled at no
    /// known `.await` always.
    pub(crate) fn holds_in(&self, frames: &[CopiedFrame]) -> bool {
        self.frame == 0 || suspended_in(self.frame, self.path, frames)
    }
}

/// The first wait of each waiting task, by task id.
pub(crate) fn waiting_tasks(registry: &Registry) -> HashMap<u64, WaitingFor> {
    waits_by_task(registry)
        .into_iter()
        .filter_map(|(task, waits)| Some((task, waits.into_iter().next()?)))
        .collect()
}

/// The waits of each waiting task that a reader may show, by task id, in
/// the order of the resources' keys: a reader shows the first one that
/// holds (see [`WaitingFor::holds_in`]), so none is kept after one that
/// always holds, nor after one of the same frame at the same `.await`
/// under the same frames.
pub(crate) fn waits_by_task(registry: &Registry) -> HashMap<u64, Vec<WaitingFor>> {
    let mut out: HashMap<u64, Vec<WaitingFor>> = HashMap::new();
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
        // A wait polled between two `.await`s holds at none: a task is
        // never suspended there.
        for w in copy
            .waits
            .iter()
            .filter(|w| w.task != 0 && w.awaiting != NOT_AT_AWAIT)
        {
            // Id 0 (none known) names no site.
            let awaiting = await_site_by_id(awaited_site(w.awaiting)).map(AwaitSite::location);
            let waits = out.entry(w.task).or_default();
            // A later wait is never shown after one that always holds, or
            // after one at the same `.await` under the same frames (a
            // `join_all` of handles): whenever the later would hold, so
            // would that one.
            if waits
                .iter()
                .any(|x| x.frame == 0 || (x.frame, x.path) == (w.awaiting, w.path))
            {
                continue;
            }
            waits.push(WaitingFor {
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
                awaiting,
                frame: w.awaiting,
                path: w.path,
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
