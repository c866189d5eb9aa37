//! The task registry: every live task root, readable from any thread.
//!
//! A traced future polled while no traced frame is active on its thread is
//! a **task root** (see `DESIGN.md`). On its first poll it takes a
//! `TaskSlot` from the `Registry`; when it completes or is dropped it
//! gives the slot back. No spawn wrapper is needed; spawn helpers
//! ([`spawn`]) only add a name and the spawning task.
//!
//! # Slots are never freed
//!
//! Slots live in pages that are allocated once and never deallocated, so a
//! reader on another thread may dereference any slot at any time. A slot is
//! reused by later tasks; the task id (`u64`, never reused) tells them
//! apart. Readers validate every copy the way a seqlock does: load `id`
//! (acquire), copy the fields, fence, load `id` again; if it changed, the
//! task ended while being read and the copy is discarded.
//!
//! # Who writes what
//!
//! | field | writer |
//! |---|---|
//! | `id`, `parent`, `spawn_location`, `root_call_site`, `name` | the registering thread (first poll), then cleared by whoever completes or drops the root |
//! | `state` | the polling thread only (running, idle, or scheduled when it woke itself), with the time of the change |
//! | `polls`, `seen_wakes`, `self_wakes` | the polling thread only (load + store, no read-modify-write) |
//! | `wakes` | wakers outside the task's poll, by compare-and-swap on a word that carries the slot generation, so a stale waker of an earlier task cannot count |
//! | `woken_ms` | the first such waker after a poll started |
//! | `stack` | the polling thread only (`published`); other threads only retire slots there |
//!
//! A task is *scheduled* when its state word says so or when `wakes` has
//! moved past `seen_wakes` (woken since its last poll started); readers
//! combine the two.

pub(crate) mod published;
pub(crate) mod registry;
pub mod spawn;
pub(crate) mod waker;

pub use published::STACK_CAPACITY;
pub(crate) use registry::{TaskSlot, registry};
pub use spawn::{Spawned, spawned};

/// The scheduling state of a task, as seen by a dump.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    /// Inside a poll right now.
    Running,
    /// Suspended and not woken: waiting for something.
    Idle,
    /// Woken, but not yet polled again (waiting for the executor).
    Scheduled,
}

impl TaskState {
    /// The lowercase name used in dumps (`running`, `idle`, `scheduled`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Running => "running",
            TaskState::Idle => "idle",
            TaskState::Scheduled => "scheduled",
        }
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TaskState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "running" => Ok(TaskState::Running),
            "idle" => Ok(TaskState::Idle),
            "scheduled" => Ok(TaskState::Scheduled),
            other => Err(format!(
                "unknown task state {other:?}: expected running, idle or scheduled"
            )),
        }
    }
}
