//! Streaming dumps: the live tasks read one at a time and handed over at
//! once, in memory bounded by one task, however many tasks there are.
//!
//! [`dump()`](super::dump()) builds a whole [`TaskDump`](super::TaskDump)
//! (every task with its frames) and then renders it: for 10,000 tasks
//! about 10 MB of model and as much text again. The forms here read each
//! live task into one scratch [`TaskInfo`] (`collect.rs`), reused from
//! task to task, and pass it on before reading the next: to a closure, or
//! to the text or JSON renderer's stream ([`TextStream`], [`JsonStream`]),
//! which writes through a buffer of 32 KB. The order and the filters are
//! documented on [`LiveTasks`], the public face of this file.

use std::fmt;
use std::io;
use std::time::Duration;

use super::collect::{FILED_BATCH, for_each_entry};
use super::json_write::JsonStream;
use super::text::TextStream;
use super::{DUMP_FORMAT_VERSION, TaskInfo};

use crate::task::TaskState;

/// What a filter sees of a live task before reading the rest of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskStatus {
    /// Task id, as in [`TaskInfo::id`].
    pub id: u64,
    /// Scheduling state.
    pub state: TaskState,
    /// Time spent in `state` so far, in milliseconds (coarse clock).
    pub state_ms: u64,
}

impl TaskStatus {
    /// Time spent in the current state.
    pub fn time_in_state(&self) -> Duration {
        Duration::from_millis(self.state_ms)
    }
}

/// What a streaming dump saw, besides the tasks themselves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DumpSummary {
    /// Tasks handed over (or written): live, selected by the filter, and
    /// still live when read.
    pub tasks: usize,
    /// Stack copies that raced with a writer and were retried, as in
    /// [`TaskDump::torn_copies`](super::TaskDump::torn_copies).
    pub torn_copies: u64,
    /// Task roots that ran untracked because the registry was full, as in
    /// [`TaskDump::untracked_roots`](super::TaskDump::untracked_roots).
    pub untracked_roots: u64,
}

/// Writes the text form of every live task to `out`, one task at a time,
/// in registry order (see [`LiveTasks`]).
///
/// The text is what `dump().to_string()` writes for the same tasks, in a
/// different order, written in chunks of about 32 KB; `out` needs no
/// buffer of its own. Memory used does not grow with the number of tasks
/// (a buffer of at most 768 KB holds the roots filed under tokio tasks,
/// see [`LiveTasks`]).
/// Never blocks, pauses or polls any task. An error of `out` is returned
/// after the pass (nothing more is written once `out` failed).
///
/// ```
/// use async_stack::traced_async;
///
/// #[traced_async(name = "waiter")]
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
/// let mut text = Vec::new();
/// let summary = async_stack::dump::write_text(&mut text).unwrap();
/// let text = String::from_utf8(text).unwrap();
/// assert!(summary.tasks >= 1);
/// assert!(text.contains(" \"waiter\" [idle "));
/// assert!(text.contains("  waiter [async]\n"));
/// drop(tx);
/// pool.run();
/// ```
pub fn write_text(out: impl io::Write) -> io::Result<DumpSummary> {
    live_tasks().write_text(out)
}

/// Writes the JSON form of every live task to `out`, one task at a time,
/// in registry order (see [`LiveTasks`]).
///
/// The JSON is what `dump().to_json()` writes for the same tasks, in a
/// different order, byte for byte (so [`TaskDump::from_json`] reads it),
/// written in chunks of about 32 KB; `out` needs no buffer of its own.
/// Memory used does not grow with the number of tasks (a buffer of at
/// most 768 KB holds the roots filed under tokio tasks, see
/// [`LiveTasks`]): a dump of a
/// million tasks holds one task and 32 KB of JSON at a time, where
/// `dump().to_json()` holds every task and all of their JSON. Never
/// blocks, pauses or polls any task. An error of `out` is returned after
/// the pass (nothing more is written once `out` failed).
///
/// [`TaskDump::from_json`]: super::TaskDump::from_json
///
/// ```
/// use async_stack::{TaskDump, traced_async};
///
/// #[traced_async(name = "waiter")]
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
/// let mut json = Vec::new();
/// let summary = async_stack::dump::write_json(&mut json).unwrap();
/// let dump = TaskDump::from_json(std::str::from_utf8(&json).unwrap()).unwrap();
/// assert_eq!(dump.tasks.len(), summary.tasks);
/// assert!(dump.tasks.iter().any(|t| t.name.as_deref() == Some("waiter")));
/// drop(tx);
/// pool.run();
/// ```
pub fn write_json(out: impl io::Write) -> io::Result<DumpSummary> {
    live_tasks().write_json(out)
}

/// The live tasks, to stream: filter them by status, then visit each
/// ([`LiveTasks::for_each`]) or write its text ([`LiveTasks::write_text`])
/// or JSON ([`LiveTasks::write_json`]).
///
/// ```
/// use async_stack::{TaskState, traced_async};
///
/// #[traced_async(name = "parked")]
/// async fn parked(rx: futures::channel::oneshot::Receiver<()>) {
///     let _ = rx.await;
/// }
///
/// let (tx, rx) = futures::channel::oneshot::channel();
/// let mut pool = futures::executor::LocalPool::new();
/// use futures::task::LocalSpawnExt;
/// pool.spawner().spawn_local(parked(rx)).unwrap();
/// pool.run_until_stalled();
///
/// // Only idle tasks are read in full; each is handed over and forgotten.
/// let mut names = Vec::new();
/// async_stack::dump::live_tasks()
///     .filter(|status| status.state == TaskState::Idle)
///     .for_each(|task| names.extend(task.name.clone()));
/// assert!(names.iter().any(|n| n == "parked"));
/// drop(tx);
/// pool.run();
/// ```
pub fn live_tasks() -> LiveTasks<'static> {
    LiveTasks { filter: None }
}

/// A streaming dump being set up; see [`live_tasks`].
///
/// Each live task is read into one scratch [`TaskInfo`], reused from task
/// to task, and passed on before the next is read: to a closure
/// ([`LiveTasks::for_each`]), or as text or JSON to an [`io::Write`]
/// through a buffer of 32 KB ([`LiveTasks::write_text`],
/// [`LiveTasks::write_json`]). What a pass allocates is one task, the
/// buffer, a snapshot of the site tables and the renderer's caches,
/// whatever the number of tasks (plus, with roots filed under tokio
/// tasks, a buffer of at most 768 KB, see "Order"): about 80 KB for 10,000 tasks of 9
/// frames, where `dump().to_string()` allocates about 45 MB.
///
/// # Order
///
/// Tasks come in the order of their records in the registry, **not sorted
/// by id**: records are reused, so a young task can come before an old one.
/// (Sorting needs every task first, which is what [`dump()`](super::dump())
/// does.) Roots filed under a tokio task (feature `tokio`) are put aside
/// during that pass, and each tokio task is then read as one entry (see
/// [`TaskInfo::branches`]), by tokio id, after the tasks of their own. The
/// roots put aside take 24 bytes each, in a buffer of at most 768 KB
/// (32,768 roots) taken when the first is met; more take further passes
/// over the registry, each for a share of the tokio tasks (their order is
/// then by tokio id within each share). Apart from the order, [`write_text`] writes exactly what
/// `dump().to_string()` writes for the same tasks, and [`write_json`]
/// what `dump().to_json()` writes.
///
/// # Filters
///
/// [`LiveTasks::filter`] sees a task's [`TaskStatus`] (id, state, time in
/// state; for a tokio task, merged from its roots' as its entry's are),
/// read in two loads per root before anything else of the task: a task it
/// skips costs those two loads, not a copy of its stack. The stall
/// watchdog uses that to find the few stalled tasks among many. A task can
/// move on between its status and the copy that follows, so the state of a
/// [`TaskInfo`] handed over may differ from the status the filter saw (it
/// is one consistent copy of the task).
pub struct LiveTasks<'a> {
    /// Selects tasks by status; `None` keeps every task.
    filter: Option<Filter<'a>>,
}

type Filter<'a> = Box<dyn FnMut(&TaskStatus) -> bool + 'a>;

impl fmt::Debug for LiveTasks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveTasks")
            .field("filtered", &self.filter.is_some())
            .finish()
    }
}

impl<'a> LiveTasks<'a> {
    /// Keeps only the tasks for which `keep` returns `true`. `keep` sees a
    /// task's status before anything else of it is read (see
    /// [`LiveTasks`]); given twice, a task must pass both.
    pub fn filter<'b>(self, mut keep: impl FnMut(&TaskStatus) -> bool + 'b) -> LiveTasks<'b>
    where
        'a: 'b,
    {
        let filter: Filter<'b> = match self.filter {
            None => Box::new(keep),
            Some(mut first) => Box::new(move |status| first(status) && keep(status)),
        };
        LiveTasks {
            filter: Some(filter),
        }
    }

    /// Reads each selected task and hands it to `visit`, in the order
    /// described on [`LiveTasks`].
    /// The task is read into the same scratch [`TaskInfo`] each time, so
    /// `visit` borrows it only for the call; clone what it keeps.
    pub fn for_each(self, mut visit: impl FnMut(&TaskInfo)) -> DumpSummary {
        match self.filter {
            Some(keep) => for_each_entry(keep, |t| visit(t), FILED_BATCH),
            None => for_each_entry(|_| true, |t| visit(t), FILED_BATCH),
        }
    }

    /// Writes the text form of each selected task to `out` (see
    /// [`write_text`]).
    pub fn write_text(self, out: impl io::Write) -> io::Result<DumpSummary> {
        let mut stream = TextStream::new(out);
        let summary = self.for_each(|task| stream.task(task));
        stream.finish()?;
        Ok(summary)
    }

    /// Writes the JSON form of each selected task to `out`, as one
    /// document (see [`write_json`]): its `torn_copies` and
    /// `untracked_roots` are those of the pass, as in the
    /// [`DumpSummary`] returned.
    pub fn write_json(self, out: impl io::Write) -> io::Result<DumpSummary> {
        let mut stream = JsonStream::new(out, DUMP_FORMAT_VERSION);
        let summary = self.for_each(|task| stream.task(task));
        stream.finish(&summary)?;
        Ok(summary)
    }
}
