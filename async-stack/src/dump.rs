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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::site::{AwaitSite, CallSite, await_site_by_id, call_site_by_id};
use crate::task::published::{Entry, StackCopy};
use crate::task::registry::{RawTask, public_state};
use crate::task::{TaskState, registry};

/// A source location (file, line, column).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceLocation {
    /// Source file, as `file!()` records it.
    pub file: Cow<'static, str>,
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
    pub root: Option<Cow<'static, str>>,
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

    fn from_raw(raw: RawTask, copy: &StackCopy, sites: &Sites, now_ms: u64) -> TaskInfo {
        let (words, len) = if raw.stack_copied {
            (&copy.words[..], copy.len)
        } else {
            (&[][..], 0)
        };
        let running = if raw.stack_copied {
            copy.running_mask()
        } else {
            0
        };
        let innermost_running = copy.active.filter(|_| raw.stack_copied).map(|a| a as usize);
        let order = if raw.stack_copied {
            copy.source_order()
        } else {
            Vec::new()
        };
        let mut frames = Vec::with_capacity(order.len());
        for i in order {
            let e = Entry::decode(words[i]);
            let (function, defined_at) = sites.call(e.call_site);
            let awaiting_at = if Some(i) == innermost_running {
                None
            } else {
                sites.await_site(e.await_site)
            };
            frames.push(DumpFrame {
                depth: e.depth,
                function,
                defined_at,
                awaiting_at,
                running: running & (1 << i) != 0,
            });
        }
        TaskInfo {
            id: raw.id,
            name: raw.name.map(|n| n.to_string()),
            state: public_state(raw.state),
            state_ms: now_ms.saturating_sub(raw.since_ms),
            polls: raw.polls,
            wakes: raw.wakes,
            parent: (raw.parent != 0).then_some(raw.parent),
            spawned_at: raw.location.map(|l| SourceLocation {
                file: Cow::Borrowed(l.file()),
                line: l.line(),
                column: l.column(),
            }),
            root: (raw.root_call_site != 0).then(|| sites.call(raw.root_call_site).0),
            frames,
            truncated: len.saturating_sub(words.len() as u32),
            stack_unavailable: !raw.stack_copied,
        }
    }
}

/// The site tables, copied once per dump so that resolving an id is an
/// index, not a lock. Every string is `'static`: frames borrow them.
struct Sites {
    calls: Vec<&'static CallSite>,
    awaits: Vec<&'static AwaitSite>,
}

impl Sites {
    fn new() -> Self {
        let (calls, awaits) = crate::site::snapshot();
        Sites { calls, awaits }
    }

    // A site registered after the snapshot (during this dump) is looked up
    // in the shared table instead.
    fn call(&self, id: u32) -> (Cow<'static, str>, Option<SourceLocation>) {
        let snapshot = (id as usize).checked_sub(1).and_then(|i| self.calls.get(i));
        match snapshot.copied().or_else(|| call_site_by_id(id)) {
            Some(c) => (
                Cow::Borrowed(c.function_static()),
                Some(SourceLocation {
                    file: Cow::Borrowed(c.file()),
                    line: c.line(),
                    column: c.column(),
                }),
            ),
            None => (Cow::Borrowed("<unknown>"), None),
        }
    }

    fn await_site(&self, id: u32) -> Option<SourceLocation> {
        let snapshot = (id as usize)
            .checked_sub(1)
            .and_then(|i| self.awaits.get(i));
        let a = snapshot.copied().or_else(|| await_site_by_id(id))?;
        Some(SourceLocation {
            file: Cow::Borrowed(a.file()),
            line: a.line(),
            column: a.column(),
        })
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
    let mut copy = StackCopy::default();
    let sites = Sites::new();
    registry().for_each_slot(|slot| {
        if let Some(raw) = slot.read(&mut copy) {
            torn += u64::from(raw.torn);
            tasks.push(TaskInfo::from_raw(raw, &copy, &sites, now_ms));
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
fn write_pad(f: &mut String, n: usize) -> fmt::Result {
    const SPACES: &str = "                                                                ";
    let mut n = n;
    while n > 0 {
        let k = n.min(SPACES.len());
        f.write_str(&SPACES[..k])?;
        n -= k;
    }
    Ok(())
}

fn write_location(f: &mut String, at: &SourceLocation) -> fmt::Result {
    let mut buf = itoa::Buffer::new();
    f.write_str(&at.file)?;
    f.write_str(":")?;
    f.write_str(buf.format(at.line))?;
    f.write_str(":")?;
    f.write_str(buf.format(at.column))
}

fn write_frames(f: &mut String, frames: &[DumpFrame]) -> fmt::Result {
    fn subtree_end(frames: &[DumpFrame], i: usize) -> usize {
        let d = frames[i].depth;
        let mut j = i + 1;
        while j < frames.len() && frames[j].depth > d {
            j += 1;
        }
        j
    }
    fn walk(f: &mut String, frames: &[DumpFrame], i: usize) -> fmt::Result {
        let end = subtree_end(frames, i);
        let mut c = i + 1;
        while c < end {
            walk(f, frames, c)?;
            c = subtree_end(frames, c);
        }
        // The hot loop of a large dump: plain slices and integers, no
        // `format_args!` per field.
        let fr = &frames[i];
        let pad = 2 * (fr.depth as usize + 1);
        write_pad(f, pad)?;
        f.write_str(&fr.function)?;
        f.write_str(" [async]\n")?;
        write_pad(f, pad + 4)?;
        match (&fr.awaiting_at, fr.running) {
            (Some(at), _) => {
                f.write_str("awaiting at ")?;
                write_location(f, at)?;
                f.write_str("\n")
            }
            (None, true) => f.write_str("running\n"),
            (None, false) => f.write_str("not suspended at an instrumented .await\n"),
        }
    }
    let mut i = 0;
    while i < frames.len() {
        walk(f, frames, i)?;
        i = subtree_end(frames, i);
    }
    Ok(())
}

fn write_footer(f: &mut String, t: &TaskInfo) -> fmt::Result {
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

fn render_task(f: &mut String, t: &TaskInfo) -> fmt::Result {
    write_header(f, t)?;
    write_frames(f, &t.frames)?;
    write_footer(f, t)
}

fn write_header(f: &mut String, t: &TaskInfo) -> fmt::Result {
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

impl TaskDump {
    /// The Go-style text form, as `Display` writes it (`coalesce` is what
    /// `{:#}` selects), built in one preallocated `String`: the fast way to
    /// get the text of a large dump.
    pub fn to_text(&self, coalesce: bool) -> String {
        let frames: usize = self.tasks.iter().map(|t| t.frames.len()).sum();
        let mut out = String::with_capacity(self.tasks.len() * 96 + frames * 112);
        // Writing to a `String` cannot fail.
        let _ = self.render(&mut out, coalesce);
        out
    }

    fn render(&self, f: &mut String, coalesce: bool) -> fmt::Result {
        if !coalesce {
            for (i, t) in self.tasks.iter().enumerate() {
                if i > 0 {
                    writeln!(f)?;
                }
                render_task(f, t)?;
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

impl fmt::Display for TaskDump {
    /// The Go-style text form. `{:#}` coalesces tasks whose state, stack
    /// and spawn site are identical into one entry with a count.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            return f.write_str(&self.to_text(true));
        }
        // One task at a time through a small reused buffer: no giant
        // intermediate string, and few calls into the formatter.
        let mut buf = String::with_capacity(1024);
        for (i, t) in self.tasks.iter().enumerate() {
            buf.clear();
            if i > 0 {
                buf.push('\n');
            }
            render_task(&mut buf, t)?;
            f.write_str(&buf)?;
        }
        Ok(())
    }
}
