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
//! `{:#}` coalesces tasks with identical stacks (same state, frames and
//! spawn site, whatever their names) into one entry with a count, listing
//! each task's id and name.
//!
//! # JSON form
//!
//! [`TaskDump::to_json`] follows the schema checked in at
//! `docs/task-dump.schema.json`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::site::{await_site_by_id, call_site_by_id};
use crate::task::published::Entry;
use crate::task::registry::{RawTask, public_state};
use crate::task::{TaskState, registry};

/// A source location (file, line, column).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceLocation {
    /// Source file, as `file!()` records it.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One async frame of a task's stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DumpFrame {
    /// Depth in the task's tree of pending frames; the root is 0.
    pub depth: u32,
    /// The function (`module::path::name`) or explicit name.
    pub function: String,
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
    /// Task id, unique for the life of the process.
    pub id: u64,
    /// Name, from a spawn helper or `#[traced_async(name = "...")]`.
    pub name: Option<String>,
    /// Scheduling state.
    pub state: TaskState,
    /// Time spent in `state` so far, in milliseconds (coarse clock).
    pub state_ms: u64,
    /// Number of polls so far.
    pub polls: u64,
    /// Number of wakes so far.
    pub wakes: u64,
    /// The task that spawned this one, when known.
    pub parent: Option<u64>,
    /// Where the task was spawned, when spawned through a helper.
    pub spawned_at: Option<SourceLocation>,
    /// The root future's function (or explicit name).
    pub root: Option<String>,
    /// Pending frames, a tree in pre-order (root first, children in source
    /// order). The text form prints them innermost first.
    pub frames: Vec<DumpFrame>,
    /// Frames beyond the published stack's capacity that are not shown.
    pub truncated: u32,
    /// `true` when the stack changed on every copy attempt (the task was
    /// polling hard); the frames are then empty rather than torn.
    pub stack_unavailable: bool,
}

impl TaskInfo {
    /// Time spent in the current state.
    pub fn time_in_state(&self) -> Duration {
        Duration::from_millis(self.state_ms)
    }

    fn from_raw(raw: RawTask, now_ms: u64) -> TaskInfo {
        let copy = raw.stack.clone().unwrap_or_default();
        let entries: Vec<Entry> = copy.words.iter().map(|w| Entry::decode(*w)).collect();
        let running = copy.running();
        let innermost_running = copy.active.map(|a| a as usize);
        let frames = copy
            .source_order()
            .into_iter()
            .map(|i| {
                let e = &entries[i];
                let call = call_site_by_id(e.call_site);
                let awaiting_at = if Some(i) == innermost_running {
                    None
                } else {
                    await_site_by_id(e.await_site).map(|a| SourceLocation {
                        file: a.file().to_string(),
                        line: a.line(),
                        column: a.column(),
                    })
                };
                DumpFrame {
                    depth: e.depth,
                    function: call.map_or_else(|| "<unknown>".to_string(), |c| c.function()),
                    defined_at: call.map(|c| SourceLocation {
                        file: c.file().to_string(),
                        line: c.line(),
                        column: c.column(),
                    }),
                    awaiting_at,
                    running: running[i],
                }
            })
            .collect();
        TaskInfo {
            id: raw.id,
            name: raw.name.map(|n| n.to_string()),
            state: public_state(raw.state),
            state_ms: now_ms.saturating_sub(raw.since_ms),
            polls: raw.polls,
            wakes: raw.wakes,
            parent: (raw.parent != 0).then_some(raw.parent),
            spawned_at: raw.location.map(|l| SourceLocation {
                file: l.file().to_string(),
                line: l.line(),
                column: l.column(),
            }),
            root: call_site_by_id(raw.root_call_site).map(|c| c.function()),
            frames,
            truncated: copy.len.saturating_sub(copy.words.len() as u32),
            stack_unavailable: raw.stack.is_none(),
        }
    }
}

/// A snapshot of every live task. Build one with [`dump()`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDump {
    /// Format version of the JSON form.
    pub version: u32,
    /// Live tasks, by id.
    pub tasks: Vec<TaskInfo>,
    /// Stack copies that raced with a writer and were retried.
    pub torn_copies: u64,
    /// Task roots that ran untracked because the registry was full.
    pub untracked_roots: u64,
}

/// The JSON format version [`TaskDump::to_json`] writes.
pub const DUMP_FORMAT_VERSION: u32 = 1;

/// Takes a dump of every live task.
///
/// Never blocks, pauses or polls any task; safe to call from any thread,
/// including from inside a task, a signal-dump thread or a watchdog.
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
    let now_ms = crate::clock::now_ns() / 1_000_000;
    let mut tasks = Vec::new();
    let mut torn = 0u64;
    registry().for_each_slot(|slot| {
        if let Some(raw) = slot.read() {
            torn += u64::from(raw.torn);
            tasks.push(TaskInfo::from_raw(raw, now_ms));
        }
    });
    tasks.sort_by_key(|t| t.id);
    TaskDump {
        version: DUMP_FORMAT_VERSION,
        tasks,
        torn_copies: torn,
        untracked_roots: registry().untracked(),
    }
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

    /// The task with this id, if it was live.
    pub fn task(&self, id: u64) -> Option<&TaskInfo> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The JSON form (schema: `docs/task-dump.schema.json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Parses the JSON form, with a clear error for malformed input.
    pub fn from_json(json: &str) -> Result<TaskDump, serde_json::Error> {
        serde_json::from_str(json)
    }
}

/// Formats a duration the way dumps show it: `850ms`, `2.3s`, `4m12s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{}s", ms / 1_000, (ms % 1_000) / 100)
    } else if ms < 3_600_000 {
        format!("{}m{}s", ms / 60_000, (ms % 60_000) / 1_000)
    } else {
        format!("{}h{}m", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}

/// Writes frames innermost first: a post-order walk of the pre-order tree,
/// indented by depth, so a linear stack reads top-down from the leaf and
/// each pending branch appears (in source order) above its parent.
fn write_frames(f: &mut fmt::Formatter<'_>, frames: &[DumpFrame]) -> fmt::Result {
    fn subtree_end(frames: &[DumpFrame], i: usize) -> usize {
        let d = frames[i].depth;
        let mut j = i + 1;
        while j < frames.len() && frames[j].depth > d {
            j += 1;
        }
        j
    }
    fn walk(f: &mut fmt::Formatter<'_>, frames: &[DumpFrame], i: usize) -> fmt::Result {
        let end = subtree_end(frames, i);
        let mut c = i + 1;
        while c < end {
            walk(f, frames, c)?;
            c = subtree_end(frames, c);
        }
        let fr = &frames[i];
        let pad = "  ".repeat(fr.depth as usize + 1);
        writeln!(f, "{pad}{} [async]", fr.function)?;
        match (&fr.awaiting_at, fr.running) {
            (Some(at), _) => writeln!(f, "{pad}    awaiting at {at}"),
            (None, true) => writeln!(f, "{pad}    running"),
            (None, false) => writeln!(f, "{pad}    not suspended at an instrumented .await"),
        }
    }
    let mut i = 0;
    while i < frames.len() {
        walk(f, frames, i)?;
        i = subtree_end(frames, i);
    }
    Ok(())
}

fn write_footer(f: &mut fmt::Formatter<'_>, t: &TaskInfo) -> fmt::Result {
    if t.stack_unavailable {
        writeln!(f, "  (stack changed during every copy; not shown)")?;
    }
    if t.truncated > 0 {
        writeln!(f, "  ... {} more frames not published", t.truncated)?;
    }
    match (&t.spawned_at, t.parent) {
        (Some(at), Some(p)) => writeln!(f, "  spawned at {at} by task {p}"),
        (Some(at), None) => writeln!(f, "  spawned at {at}"),
        (None, Some(p)) => writeln!(f, "  spawned by task {p}"),
        (None, None) => match t.frames.first().and_then(|r| r.defined_at.as_ref()) {
            Some(def) => writeln!(f, "  root future defined at {def}"),
            None => Ok(()),
        },
    }
}

fn write_header(f: &mut fmt::Formatter<'_>, t: &TaskInfo) -> fmt::Result {
    write!(f, "task {}", t.id)?;
    if let Some(n) = &t.name {
        write!(f, " {n:?}")?;
    }
    writeln!(
        f,
        " [{} {}, {} polls]:",
        t.state,
        format_duration(t.time_in_state()),
        t.polls
    )
}

impl fmt::Display for TaskDump {
    /// The Go-style text form. `{:#}` coalesces tasks whose state, stack
    /// and spawn site are identical into one entry with a count.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !f.alternate() {
            for (i, t) in self.tasks.iter().enumerate() {
                if i > 0 {
                    writeln!(f)?;
                }
                write_header(f, t)?;
                write_frames(f, &t.frames)?;
                write_footer(f, t)?;
            }
            return Ok(());
        }
        type Key<'a> = (TaskState, &'a [DumpFrame], Option<&'a SourceLocation>);
        let mut groups: BTreeMap<u64, (Key<'_>, Vec<&TaskInfo>)> = BTreeMap::new();
        let mut index: Vec<(Key<'_>, u64)> = Vec::new();
        for t in &self.tasks {
            let key: Key<'_> = (t.state, &t.frames, t.spawned_at.as_ref());
            match index.iter().find(|(k, _)| *k == key) {
                Some((_, first)) => groups.get_mut(first).map(|g| g.1.push(t)).unwrap_or(()),
                None => {
                    index.push((key, t.id));
                    groups.insert(t.id, (key, vec![t]));
                }
            }
        }
        for (i, (_, members)) in groups.values().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            let first = members[0];
            if members.len() == 1 {
                write_header(f, first)?;
            } else {
                let min = members.iter().map(|t| t.state_ms).min().unwrap_or(0);
                let max = members.iter().map(|t| t.state_ms).max().unwrap_or(0);
                let ids: Vec<String> = members
                    .iter()
                    .map(|t| match &t.name {
                        Some(n) => format!("{} {n:?}", t.id),
                        None => t.id.to_string(),
                    })
                    .collect();
                writeln!(
                    f,
                    "{} tasks [{} {}..{}]: {}",
                    members.len(),
                    first.state,
                    format_duration(Duration::from_millis(min)),
                    format_duration(Duration::from_millis(max)),
                    ids.join(", ")
                )?;
            }
            write_frames(f, &first.frames)?;
            write_footer(f, first)?;
        }
        Ok(())
    }
}
