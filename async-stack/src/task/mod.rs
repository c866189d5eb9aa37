//! Tasks: every live task root, readable from any thread without blocking
//! it.
//!
//! A traced future polled while no traced frame is active on its thread is
//! a **task root** (see `DESIGN.md`). It keeps a **task record**
//! ([`record`](self#files)) from its first poll until it completes or is
//! dropped: 128 bytes, never freed, holding its state, counts, waker and
//! the published stack of its frames, which other threads copy. No spawn
//! wrapper is needed; spawn helpers ([`spawn`]) only add a name and the
//! spawning task.
//!
//! # Files, from the bottom up
//!
//! Each file imports only from the files listed before it.
//!
//! - `place.rs`: the place word: a frame's record, incarnation and slots;
//! - `stack/words.rs`: where the published stack's slots live, and the
//!   slot, `foreign` and `meta` word layouts (`stack/mod.rs` states the
//!   whole protocol);
//! - `record/layout.rs`: the record's layout, who writes each field, and
//!   the writes of the polling thread and of wakers; `record/vtables.rs`:
//!   the executor's waker in the record; `record/names.rs`: names and
//!   extensions;
//! - `registry.rs`: the records, chunks and extensions in never-freed
//!   pages, the free lists, task ids, and recycling;
//! - `stack/reader.rs` and `stack/writer.rs`: copies of the published
//!   stack, and the polling thread's (and foreign threads') writes;
//! - `record/read.rs`: how a reader copies one instant of a record;
//! - `tokio_task.rs`: the tokio task a root's first poll runs in
//!   (feature `tokio`), under which a dump files it;
//! - `spawn.rs`: the spawn helpers' wrapper future ([`Spawned`]);
//! - `spawn_info.rs`: the spawn metadata it offers the root inside it;
//! - `waker.rs`: the task's waker, kept in its record;
//! - `end.rs`: the end of a task;
//! - `relink.rs`: a frame moving between places (and tasks);
//! - `root.rs`: a task root's registration and every poll;
//! - `traced.rs`: [`Traced`](traced::Traced), the poll protocol that drives
//!   the frames of the record layer and everything above;
//! - `tests/`, `loom_models/`: tests that drive the whole layer.

pub(crate) mod end;
pub(crate) mod place;
#[cfg(not(async_stack_loom))]
pub(crate) mod probe;
pub(crate) mod record;
pub(crate) mod registry;
pub(crate) mod relink;
pub(crate) mod root;
pub mod spawn;
pub(crate) mod spawn_info;
pub(crate) mod stack;
pub(crate) mod tokio_task;
pub(crate) mod traced;
pub(crate) mod waker;

#[cfg(all(test, async_stack_loom))]
mod loom_models;
#[cfg(all(test, not(async_stack_loom)))]
mod tests;

pub use registry::MAX_TASKS;
pub use spawn::{Spawned, spawned};
pub use stack::STACK_CAPACITY;

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
