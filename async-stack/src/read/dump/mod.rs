//! Task dumps: every live task, suspended or running, read without
//! blocking, pausing or re-polling anything.
//!
//! [`dump()`] walks the registry's slots (which are never freed) and copies
//! each live task's published stack under its sequence counter (see
//! [`crate::task`]). It never takes a lock a task could hold, never waits
//! for a running poll, and never calls into a future, so it completes even
//! when every worker thread is blocked, and it changes nothing: poll counts,
//! wake counts and states are only read.
//!
//! # Text form
//!
//! Modelled on Go's goroutine dumps. Each task has a header with its id,
//! name, state and time in that state, then its frames innermost first
//! (pending branches of a `join!` each appear, indented under their
//! parent, in source order), then where it was spawned:
//!
//! ```text
//! task 7 "handler" [idle 2.3s, 4 polls]:
//!       tour::fetch_user [async]
//!           awaiting at examples/tour.rs:52:34
//!       tour::fetch_orders [async]
//!           awaiting at examples/tour.rs:60:34
//!     tour::handle_request [async]
//!         awaiting at examples/tour.rs:41:9
//!   spawned at examples/tour.rs:90:5 by task 1
//! ```
//!
//! A task is a task root's record (see [`crate::task`]), except inside
//! tokio (feature `tokio`): every traced root first polled inside one
//! tokio task is filed under it, and a dump shows that tokio task as one
//! entry with its id, each root a top-level branch in the order of their
//! first poll ([`TaskInfo::branches`]). So a plain
//! `tokio::spawn(async { tokio::join!(left(), right()) })` reads:
//!
//! ```text
//! task 12 (tokio task 34; roots 12, 13) [idle 1.1s, 1 polls]:
//!   app::left [async]
//!       awaiting at src/app.rs:20:27
//!   app::right [async]
//!       awaiting at src/app.rs:25:27
//!   root future defined at src/app.rs:18:10
//! ```
//!
//! A task spawned through `async_stack::tokio::spawn` and not polled yet
//! has no frames: its entry says `(not polled yet)` where they would be.
//!
//! `{:#}` coalesces tasks with identical stacks (same state, frames and
//! spawn site, whatever their names) into one entry with a count, listing
//! each task's id and name.
//!
//! # JSON form
//!
//! [`TaskDump::to_json`] follows the schema checked in at
//! `docs/task-dump.schema.json`. [`TaskDump::from_json`] reads it back,
//! within bounds (at most [`TaskDump::MAX_TASKS`] tasks, depths of a real
//! tree, ...) that keep rendering a dump read from a file linear in the
//! file's size, in memory at most a small multiple of the file's.
//!
//! # Streaming
//!
//! A [`TaskDump`] holds every task at once. [`write_text`] and
//! [`write_json`] write the same text and JSON (in registry order rather
//! than by id) one task at a time, and [`live_tasks`] hands each task to a
//! closure, so that a dump of many tasks allocates for one task, not for
//! all of them: what the signal dump, the stall watchdog and the panic
//! hook use. [`TaskInfo`]'s `Display` is one task's entry of the text
//! form.
//!
//! # Files
//!
//! - `mod.rs` (this file): the model ([`TaskDump`], [`TaskInfo`],
//!   [`DumpFrame`]) and its filters;
//! - `collect.rs`: reading the task records into that model;
//! - `stream.rs`: the streaming forms ([`write_text`], [`write_json`],
//!   [`live_tasks`]);
//! - `text.rs`: the Go-style text form;
//! - `json_write.rs`: the JSON form, written;
//! - `json.rs`: the JSON form, read, and why reading one fails
//!   ([`FromJsonError`]);
//! - `cache.rs`: the text of repeated frames and stacks, rendered once
//!   (for both forms);
//! - `bounds.rs`: the bounds a dump read from a file obeys, so that
//!   rendering it stays linear in the file's size;
//! - `unwakeable.rs`: the tasks nobody can wake ([`unwakeable()`]).

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::task::TaskState;
use crate::waits::report::ResourceKind;

mod bounds;
mod cache;
mod collect;
pub(crate) mod json;
mod json_write;
#[cfg(all(test, not(async_stack_loom)))]
mod spawn_tests;
mod stream;
#[cfg(all(test, not(async_stack_loom)))]
mod task_tests;
mod text;
#[cfg(test)]
mod text_tests;
mod unwakeable;

pub use json::FromJsonError;
pub use stream::{DumpSummary, LiveTasks, TaskStatus, live_tasks, write_json, write_text};
pub use text::format_duration;
pub use unwakeable::unwakeable;

pub use crate::record::location::SourceLocation;

/// One async frame of a task's stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DumpFrame {
    /// Depth in the task's tree of pending frames; the root is 0.
    pub depth: u32,
    /// The function (`module::path::name`) or explicit name.
    pub function: Cow<'static, str>,
    /// Where the function (or `.traced()` call) is defined.
    pub defined_at: Option<SourceLocation>,
    /// The `.await` the frame is suspended on, or, while it runs, the
    /// `.await` it is polling now. `None` when the frame has not reached an
    /// instrumented `.await` (or is executing code between two).
    pub awaiting_at: Option<SourceLocation>,
    /// The frame is inside its poll right now.
    pub running: bool,
}

/// One live task, as a dump saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// Task id, unique for the life of the process. The tasks registered
    /// on one thread get increasing ids; threads take ids in blocks of 64,
    /// so ids from several threads interleave by block. For a tokio task
    /// with several traced roots, the id of the first ([`branches`]`[0]`).
    ///
    /// [`branches`]: TaskInfo::branches
    pub id: u64,
    /// The tokio task this entry is (feature `tokio`): the number that
    /// `JoinHandle::id()` and `tokio::task::id()` display. Every traced
    /// root first polled inside one tokio task is filed under it, so a
    /// plain `tokio::spawn(async { tokio::join!(a(), b()) })` is one entry
    /// with two branches, not two tasks. `None` for a root polled outside
    /// tokio (a `block_on`'s own future, another executor), which is a
    /// task of its own.
    #[serde(default)]
    pub tokio_id: Option<u64>,
    /// The ids of the traced roots this entry stands for, in the order of
    /// their first poll: `[id]` for a task of its own, one id per root of
    /// a tokio task. Each root is a top-level branch of [`frames`]: the
    /// frames at depth 0, in this order (a root whose stack could not be
    /// copied has none). A dump of an earlier format version, which has
    /// no such field, reads as `[id]`.
    ///
    /// Merging the roots of one tokio task: its state is running if a
    /// root runs, else scheduled if one is, else idle; its time in state
    /// is the running root's, the longest of the scheduled ones', or the
    /// shortest of the idle ones' (idle since the latest change); `polls`
    /// is the largest count of a root (every poll of a root is a poll of
    /// the task), `wakes` and `hidden_frames` the sums; `name`, `parent`,
    /// `spawned_at` and `root` are those of the first root that has one.
    ///
    /// [`frames`]: TaskInfo::frames
    #[serde(default, deserialize_with = "bounds::branches")]
    pub branches: Vec<u64>,
    /// Name, from a spawn helper or `#[traced_async(name = "...")]`.
    pub name: Option<String>,
    /// Scheduling state.
    pub state: TaskState,
    /// Time spent in `state` so far, in milliseconds (coarse clock).
    pub state_ms: u64,
    /// Number of polls so far.
    pub polls: u64,
    /// Number of wakes so far. A wake from inside the task's own poll (a
    /// yield) is counted when that poll returns.
    pub wakes: u64,
    /// The task that spawned this one, when known.
    pub parent: Option<u64>,
    /// Where the task was spawned, when spawned through a helper.
    pub spawned_at: Option<SourceLocation>,
    /// The root future's function (or explicit name).
    pub root: Option<Cow<'static, str>>,
    /// Pending frames, a tree in pre-order (root first, children in source
    /// order); for a tokio task with several roots, one such tree per root,
    /// in the order of [`branches`](TaskInfo::branches). The text form
    /// prints them innermost first. Reading stops past
    /// [`TaskDump::MAX_FRAMES`] frames per root.
    #[serde(deserialize_with = "bounds::frames")]
    pub frames: Vec<DumpFrame>,
    /// Live frames of the task that are not in `frames`: frames beyond the
    /// published stack's capacity, and frames whose awaiting parent is gone
    /// (detached). Called `truncated` in format version 1.
    #[serde(alias = "truncated")]
    pub hidden_frames: u32,
    /// `true` when the stack changed on every copy attempt (the task was
    /// polling hard); the frames are then empty rather than torn.
    pub stack_unavailable: bool,
    /// What its roots wait for, when they wait for a lock or semaphore of
    /// `async_stack::sync` or a spawn helper's
    /// `JoinHandle` (at most one wait per root, in the order of
    /// [`branches`](TaskInfo::branches)). The text form shows each under
    /// the frame that awaits it. Empty in dumps of format versions 1 and 2.
    #[serde(default, deserialize_with = "bounds::waits")]
    pub waits: Vec<ResourceWait>,
}

/// What a root of a task waits for: a lock or semaphore of
/// `async_stack::sync`, or a spawn helper's `JoinHandle`
/// (see [`deadlocks()`](crate::waits::report::deadlocks) for the tasks
/// that wait for each other).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceWait {
    /// The waiting root's task id (one of the task's
    /// [`branches`](TaskInfo::branches)).
    pub task: u64,
    /// What it waits for.
    pub resource: ResourceKind,
    /// Where the resource was created (for a `JoinHandle`, where its task
    /// was spawned).
    pub created_at: SourceLocation,
    /// The `lock()` or `acquire()` call it waits at; for a `JoinHandle`,
    /// the traced `.await` that polled it, which the root is suspended at
    /// (a handle raced in `select!` and kept while the root went on is no
    /// wait), or the `.await` of the frame the wait shows under.
    pub waiting_at: Option<SourceLocation>,
    /// How long it has waited, in milliseconds (coarse clock).
    pub waiting_ms: u64,
    /// Who holds the resource, the writer or exclusive holder first;
    /// empty for a `JoinHandle`, or for a resource released that the
    /// waiter has not taken yet.
    pub holders: Vec<ResourceHolder>,
    /// For a `JoinHandle`: the tokio id of the task it waits for.
    pub tokio_task: Option<u64>,
}

/// A holder of the resource a root waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceHolder {
    /// The holding task's id, `0` when it was acquired outside any traced
    /// task.
    pub task: u64,
    /// Where it acquired it.
    pub acquired_at: SourceLocation,
    /// For how long, in milliseconds (coarse clock); `0` for a hold
    /// acquired outside any traced task, which is not timed (so that code
    /// outside traced tasks never starts the clock), and which text dumps
    /// show without a time.
    pub held_ms: u64,
    /// The permits it holds (1 for a lock).
    pub permits: u32,
}

impl TaskInfo {
    /// Time spent in the current state.
    pub fn time_in_state(&self) -> Duration {
        Duration::from_millis(self.state_ms)
    }

    /// Spawned through `async_stack::tokio::spawn` and waiting for its
    /// first poll: never polled, and without frames for a reason other
    /// than a stack that kept changing.
    pub(crate) fn not_polled_yet(&self) -> bool {
        self.polls == 0 && self.frames.is_empty() && !self.stack_unavailable
    }

    /// The frames of the root `branch` (one of `branches`): its range of
    /// `frames` when every root has frames, else all of them.
    pub(crate) fn frames_of(&self, branch: u64) -> std::ops::Range<usize> {
        let starts = || (0..self.frames.len()).filter(|&i| self.frames[i].depth == 0);
        let whole = 0..self.frames.len();
        if starts().count() != self.branches.len() {
            return whole;
        }
        match self.branches.iter().position(|&b| b == branch) {
            Some(k) => {
                let mut from = starts().skip(k);
                let start = from.next().unwrap_or(self.frames.len());
                start..from.next().unwrap_or(self.frames.len())
            }
            None => whole,
        }
    }

    /// The frame under which each of the task's waits shows (an index
    /// into `frames`): in the wait's root (see [`TaskInfo::frames_of`]),
    /// the deepest frame awaiting at the wait's line, else the deepest
    /// frame; `None` when the root shows no frame. Text dumps place wait
    /// lines there.
    pub(crate) fn wait_frames(&self) -> Vec<(Option<usize>, &ResourceWait)> {
        let frames = &self.frames;
        self.waits
            .iter()
            .map(|w| {
                let range = self.frames_of(w.task);
                let same_line = |i: &usize| {
                    let f = &frames[*i];
                    matches!((&f.awaiting_at, &w.waiting_at), (Some(a), Some(b)) if a.file == b.file && a.line == b.line)
                };
                let deepest = |candidates: &mut dyn Iterator<Item = usize>| {
                    candidates.max_by_key(|&i| (frames[i].depth, i))
                };
                let frame = deepest(&mut range.clone().filter(same_line))
                    .or_else(|| deepest(&mut range.clone()));
                (frame, w)
            })
            .collect()
    }
}

/// A snapshot of every live task. Build one with [`dump()`], or read one
/// with [`TaskDump::from_json`].
///
/// Its `Deserialize` impl rejects unknown format versions, and stops
/// reading a list past [`TaskDump::MAX_TASKS`] tasks or
/// [`TaskDump::MAX_FRAMES`] frames; [`TaskDump::from_json`] also checks the
/// other bounds of a dump file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDump {
    /// Format version of the JSON form: 1 to [`DUMP_FORMAT_VERSION`] when
    /// read.
    #[serde(deserialize_with = "bounds::version")]
    pub version: u32,
    /// Live tasks, by id. Reading stops past [`TaskDump::MAX_TASKS`] of
    /// them.
    #[serde(deserialize_with = "bounds::tasks")]
    pub tasks: Vec<TaskInfo>,
    /// Stack copies that raced with a writer and were retried.
    pub torn_copies: u64,
    /// Task roots that ran untracked because the registry was full.
    pub untracked_roots: u64,
}

/// The JSON format version [`TaskDump::to_json`] writes.
///
/// Version 2 renamed `truncated` to `hidden_frames`; version 3 added
/// `tokio_id`, `branches` and `waits`. [`TaskDump::from_json`] still reads
/// versions 1 and 2 (their tasks have no `waits`).
pub const DUMP_FORMAT_VERSION: u32 = 3;

/// Takes a dump of every live task.
///
/// Never blocks, pauses or polls any task; safe to call from any thread,
/// including from inside a task, a signal-dump thread or a watchdog.
///
/// A task spawned through `async_stack::tokio::spawn` (feature `tokio`) is in
/// the dump from its spawn: before its first poll it is
/// [`Scheduled`](TaskState::Scheduled), with no polls, no frames, its name
/// and spawn site, and no tokio id yet. Any other task is in it from its
/// first poll, when its root registers.
///
/// The dump holds every task at once, sorted by id. To print many tasks,
/// [`write_text`] writes the same text one task at a time, without
/// building the dump.
///
/// ```
/// use async_stack::{dump, traced_async, TaskState};
///
/// #[traced_async]
/// async fn waiter(rx: futures::channel::oneshot::Receiver<()>) {
///     let _ = rx.await;
/// }
///
/// let (tx, rx) = futures::channel::oneshot::channel();
/// let mut pool = futures::executor::LocalPool::new();
/// use futures::task::LocalSpawnExt;
/// pool.spawner().spawn_local(waiter(rx)).unwrap();
/// pool.run_until_stalled();
///
/// let d = dump().with_name_containing("waiter");
/// assert!(d.tasks.iter().any(|t| t.state == TaskState::Idle
///     && t.frames[0].function.ends_with("::waiter")));
/// drop(tx);
/// pool.run();
/// ```
pub fn dump() -> TaskDump {
    collect::dump_where(|_| true)
}

impl TaskDump {
    /// Keeps only tasks in one of `states`.
    pub fn with_states(mut self, states: &[TaskState]) -> Self {
        self.tasks.retain(|t| states.contains(&t.state));
        self
    }

    /// Keeps only tasks that have been in their state at least `min`.
    pub fn with_min_time_in_state(mut self, min: Duration) -> Self {
        self.tasks.retain(|t| t.time_in_state() >= min);
        self
    }

    /// Keeps only tasks whose name, or root function, contains `needle`.
    pub fn with_name_containing(mut self, needle: &str) -> Self {
        self.tasks.retain(|t| {
            t.name.as_deref().is_some_and(|n| n.contains(needle))
                || t.root.as_deref().is_some_and(|r| r.contains(needle))
        });
        self
    }

    /// The task with this id, if it was live: the entry whose id it is,
    /// or, for one root of a tokio task, the tokio task's entry (see
    /// [`TaskInfo::branches`]).
    pub fn task(&self, id: u64) -> Option<&TaskInfo> {
        self.tasks
            .iter()
            .find(|t| t.id == id)
            .or_else(|| self.tasks.iter().find(|t| t.branches.contains(&id)))
    }

    /// The entry of the tokio task with this id (as `JoinHandle::id()`
    /// displays it), if it was live and polled a traced root (feature
    /// `tokio`).
    pub fn tokio_task(&self, tokio_id: u64) -> Option<&TaskInfo> {
        self.tasks.iter().find(|t| t.tokio_id == Some(tokio_id))
    }
}
