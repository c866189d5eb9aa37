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
//! # Files
//!
//! - `record.rs`: the record's layout, who writes each field, and how a
//!   reader copies one consistent instant of it;
//! - `stack.rs`: the published stack in the record (slots, sections,
//!   foreign retirements, the reader's tree);
//! - `place.rs`: a frame's place in its task's stack, and the state machine
//!   that moves it;
//! - `root.rs`: the life of a task root (registration, each poll, the end);
//! - `waker.rs`: the task's waker, kept in its record;
//! - `registry.rs`: the never-freed arenas of records, chunks and
//!   extensions, and the free lists;
//! - `spawn.rs`: spawn metadata.

pub(crate) mod place;
#[cfg(not(async_stack_loom))]
pub(crate) mod probe;
pub(crate) mod record;
pub(crate) mod registry;
pub(crate) mod root;
pub mod spawn;
pub(crate) mod stack;
pub(crate) mod waker;

#[cfg(all(test, async_stack_loom))]
pub(crate) mod loom_support;

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
