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
use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::site::{AwaitSite, CallSite, await_site_by_id, call_site_by_id};
use crate::task::published::{Entry, StackCopy};
use crate::task::registry::RawTask;
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
        // The copy is already a tree in source order. One loop with one
        // closure, collected from a range (exact length, no growth check
        // per frame), so that each frame is written in place; see
        // `dump_frame`.
        let frames = (0..words.len())
            .map(|i| dump_frame(words, i, sites, innermost_running, running))
            .collect();
        TaskInfo {
            id: raw.id,
            // A spawn helper's name, or else the root's explicit one
            // (`#[traced_async(name = ..)]`, `.traced_named(..)`), which the
            // registry does not copy per task.
            name: raw.name.map(|n| n.to_string()).or_else(|| {
                sites
                    .call(raw.root_call_site)
                    .filter(|c| c.explicit_name() && !c.is_anonymous())
                    .map(|c| c.name().to_owned())
            }),
            state: raw.state,
            state_ms: now_ms.saturating_sub(raw.since_ms),
            polls: raw.polls,
            wakes: raw.wakes,
            parent: (raw.parent != 0).then_some(raw.parent),
            spawned_at: raw
                .location
                .map(|l| location(l.file(), l.line(), l.column())),
            root: (raw.root_call_site != 0).then(|| function_of(sites.call(raw.root_call_site))),
            frames,
            truncated: len.saturating_sub(words.len() as u32),
            stack_unavailable: !raw.stack_copied,
        }
    }
}

/// The frame of entry `i` of a copied stack. `running` has bit `i` set for
/// each entry inside its poll, and `innermost_running` is the one being
/// polled now (it has no `.await` yet).
///
/// Always inlined into the loop that pushes the frame: returned from a
/// call, the 96-byte frame goes through the stack, and copying it into the
/// vector stalls on the narrower stores that wrote it (store forwarding
/// fails), which made up a third of a dump's time.
#[inline(always)]
fn dump_frame(
    words: &[u64],
    i: usize,
    sites: &Sites,
    innermost_running: Option<usize>,
    running: u64,
) -> DumpFrame {
    let e = Entry::decode(words[i]);
    let call = sites.call(e.call_site);
    let awaiting = if Some(i) == innermost_running {
        None
    } else {
        sites.await_site(e.await_site)
    };
    DumpFrame {
        depth: e.depth,
        function: function_of(call),
        defined_at: call.map(|c| location(c.file(), c.line(), c.column())),
        awaiting_at: awaiting.map(|a| location(a.file(), a.line(), a.column())),
        running: running & (1 << i) != 0,
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

    /// The call site with interned id `id`. Inlined into the frame loop,
    /// so that a frame is built in place rather than through a returned
    /// temporary.
    #[inline]
    fn call(&self, id: u32) -> Option<&'static CallSite> {
        let snapshot = (id as usize).checked_sub(1).and_then(|i| self.calls.get(i));
        match snapshot {
            Some(c) => Some(c),
            None => Self::late_call(id),
        }
    }

    /// The `.await` site with interned id `id` (`0`: none).
    #[inline]
    fn await_site(&self, id: u32) -> Option<&'static AwaitSite> {
        let snapshot = (id as usize)
            .checked_sub(1)
            .and_then(|i| self.awaits.get(i));
        match snapshot {
            Some(a) => Some(a),
            None => Self::late_await(id),
        }
    }

    // A site registered after the snapshot (during this dump) is looked up
    // in the shared table instead.
    #[cold]
    #[inline(never)]
    fn late_call(id: u32) -> Option<&'static CallSite> {
        call_site_by_id(id)
    }

    #[cold]
    #[inline(never)]
    fn late_await(id: u32) -> Option<&'static AwaitSite> {
        await_site_by_id(id)
    }
}

/// The name a frame shows for its call site.
#[inline]
fn function_of(call: Option<&'static CallSite>) -> Cow<'static, str> {
    Cow::Borrowed(call.map_or("<unknown>", CallSite::function_static))
}

/// A `'static` source location.
#[inline]
fn location(file: &'static str, line: u32, column: u32) -> SourceLocation {
    SourceLocation {
        file: Cow::Borrowed(file),
        line,
        column,
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
    dump_where(|_, _, _| true)
}

/// A dump of the live tasks that `keep` selects by id, state and time in
/// that state (ms), which it sees before anything else of a task is read:
/// a task it skips costs two loads, not a copy of its stack. For the stall
/// watchdog, which looks for the few stalled tasks among many, and the
/// panic hook, which looks for one.
pub(crate) fn dump_where(keep: impl Fn(u64, TaskState, u64) -> bool) -> TaskDump {
    let now_ms = crate::clock::system_ms();
    // Room for every slot ever used, the most tasks that can be live, so
    // the (large) task list is never regrown and copied. Counting reads no
    // slot, only the page table; the reservation is a fraction of the
    // memory the slots themselves hold.
    let mut slots = 0;
    registry().for_each_slot(|_| slots += 1);
    let mut tasks = Vec::with_capacity(slots);
    let mut torn = 0u64;
    let mut copy = StackCopy::default();
    let sites = Sites::new();
    registry().for_each_slot(|slot| {
        let Some((id, state, since_ms)) = slot.peek() else {
            return;
        };
        if !keep(id, state, now_ms.saturating_sub(since_ms)) {
            return;
        }
        if let Some(raw) = slot.read(&mut copy) {
            torn += u64::from(raw.torn);
            tasks.push(TaskInfo::from_raw(raw, &copy, &sites, now_ms));
        }
    });
    // Ids are unique, so an unstable sort gives the same order, without a
    // scratch buffer; slots read in index order are often in id order
    // already.
    if !tasks.is_sorted_by_key(|t| t.id) {
        tasks.sort_unstable_by_key(|t| t.id);
    }
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
    let mut s = String::new();
    write_duration(&mut s, d.as_millis());
    s
}

// Text rendering.
//
// A dump of 10,000 tasks at depth 9 is about 10 MB of text, so the writers
// below append plain slices and `itoa` integers to a `String` (no
// `core::fmt` per field, no allocation per task), and each distinct frame
// and each distinct stack is formatted once per render and copied after
// that (`TextCache`).

/// Appends an integer in decimal.
fn write_int(out: &mut String, n: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Appends `ms` as [`format_duration`] formats it. The arithmetic is in
/// `u64` (a `u128` division is a library call, and every header has one);
/// only a duration beyond `u64` milliseconds takes the `u128` path, and
/// that is always the hours form.
fn write_duration(out: &mut String, ms: u128) {
    let Ok(ms) = u64::try_from(ms) else {
        write_int(out, ms / 3_600_000);
        out.push('h');
        write_int(out, (ms % 3_600_000) / 60_000);
        out.push('m');
        return;
    };
    if ms < 1_000 {
        write_int(out, ms);
        out.push_str("ms");
    } else if ms < 60_000 {
        write_int(out, ms / 1_000);
        out.push('.');
        write_int(out, (ms % 1_000) / 100);
        out.push('s');
    } else if ms < 3_600_000 {
        write_int(out, ms / 60_000);
        out.push('m');
        write_int(out, (ms % 60_000) / 1_000);
        out.push('s');
    } else {
        write_int(out, ms / 3_600_000);
        out.push('h');
        write_int(out, (ms % 3_600_000) / 60_000);
        out.push('m');
    }
}

/// Appends `n` spaces.
fn write_pad(out: &mut String, n: usize) {
    const SPACES: &str = "                                                                ";
    let mut n = n;
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// Appends `file:line:column`, as `SourceLocation`'s `Display` writes it.
fn write_location(out: &mut String, at: &SourceLocation) {
    out.push_str(&at.file);
    out.push(':');
    write_int(out, at.line);
    out.push(':');
    write_int(out, at.column);
}

/// Appends `name` quoted as `{name:?}` writes it. A name of printable
/// ASCII with no `"` or `\` (the usual kind) is exactly `"name"` (the same
/// test `str`'s `Debug` uses to pass bytes through); anything else goes
/// through `Debug` itself.
fn write_quoted(out: &mut String, name: &str) {
    if name
        .bytes()
        .all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(name);
        out.push('"');
    } else {
        // Writing to a `String` cannot fail.
        let _ = write!(out, "{name:?}");
    }
}

/// Appends one frame's two lines, indented by its depth.
fn write_frame(out: &mut String, frame: &DumpFrame) {
    let pad = 2 * (frame.depth as usize + 1);
    write_pad(out, pad);
    out.push_str(&frame.function);
    out.push_str(" [async]\n");
    write_pad(out, pad + 4);
    match (&frame.awaiting_at, frame.running) {
        (Some(at), _) => {
            out.push_str("awaiting at ");
            write_location(out, at);
            out.push('\n');
        }
        (None, true) => out.push_str("running\n"),
        (None, false) => out.push_str("not suspended at an instrumented .await\n"),
    }
}

/// Whether two strings are equal, deciding at once for two borrows of the
/// same interned site string.
fn same_str(a: &str, b: &str) -> bool {
    a.len() == b.len() && (std::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
}

/// Whether two frames render to the same text (see [`write_frame`]: depth,
/// function, `.await` site and running flag; `defined_at` is not shown).
#[inline]
fn same_frame_text(a: &DumpFrame, b: &DumpFrame) -> bool {
    a.depth == b.depth
        && a.running == b.running
        && same_str(&a.function, &b.function)
        && match (&a.awaiting_at, &b.awaiting_at) {
            (Some(x), Some(y)) => {
                x.line == y.line && x.column == y.column && same_str(&x.file, &y.file)
            }
            (None, None) => true,
            _ => false,
        }
}

/// Whether two stacks render to the same text: frame by frame, in order.
fn same_stack_text(a: &[DumpFrame], b: &[DumpFrame]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_frame_text(a, b))
}

/// A hash of what [`same_frame_text`] compares, strings by length only
/// (cheap, and enough to spread a dump's few distinct frames).
fn frame_hash(frame: &DumpFrame) -> u64 {
    let (line, column, file_len) = frame
        .awaiting_at
        .as_ref()
        .map_or((0, 0, 0), |at| (at.line, at.column, at.file.len()));
    let key = u64::from(frame.depth)
        ^ (frame.function.len() as u64) << 8
        ^ u64::from(line) << 24
        ^ u64::from(column) << 44
        ^ (file_len as u64) << 54
        ^ u64::from(frame.running) << 63;
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A hash of what [`same_stack_text`] compares.
fn stack_hash(frames: &[DumpFrame]) -> u64 {
    frames.iter().fold(frames.len() as u64, |h, f| {
        (h.rotate_left(23) ^ frame_hash(f)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    })
}

/// Text rendered once per render and copied wherever it repeats.
///
/// A dump repeats itself: frames come from a few interned sites, and many
/// tasks wait in the same place. 10,000 tasks at depth 9 hold 90,000 frames
/// but only 9 distinct frame texts, and a single distinct stack. So the
/// renderer keeps two of these tables, one for frames and one for whole
/// stacks (which it renders from the first).
///
/// Each is a direct-mapped table: a key hashes to one slot, which keeps
/// the last key rendered there and its text. A hit (the key compares
/// equal, as far as the text shows) copies the text; a miss, or a
/// collision, renders it again into the slot. So a table is never wrong,
/// only sometimes slower, and its size is bounded whatever the dump holds.
struct TextCache<'a, K: ?Sized> {
    slots: Box<[(Option<&'a K>, String)]>,
    /// `64 - log2(slots)`: a key's slot is the top bits of its hash (a
    /// multiplicative hash mixes into those).
    shift: u32,
}

impl<'a, K: ?Sized> TextCache<'a, K> {
    /// A table of `2^bits` slots.
    fn new(bits: u32) -> Self {
        assert!((1..=16).contains(&bits), "a table of 2 to 65536 slots");
        TextCache {
            slots: (0..1usize << bits).map(|_| (None, String::new())).collect(),
            shift: 64 - bits,
        }
    }

    /// The text of `key` (with hash `hash`): the text in its slot if the
    /// slot holds a key `same` as it, else rendered there by `render` first.
    #[inline]
    fn text(
        &mut self,
        key: &'a K,
        hash: u64,
        same: impl FnOnce(&K, &K) -> bool,
        render: impl FnOnce(&mut String, &'a K),
    ) -> &str {
        let (seen, text) = &mut self.slots[(hash >> self.shift) as usize];
        if !seen.is_some_and(|seen| same(seen, key)) {
            text.clear();
            render(text, key);
            *seen = Some(key);
        }
        text
    }
}

/// Writes `frames` innermost first: a post-order walk of the pre-order
/// tree, indented by depth, so a linear stack reads top-down from the leaf
/// and each pending branch appears (in source order) above its parent.
///
/// One pass: `open` holds the frames whose subtree has not ended, with
/// strictly increasing depths. A frame's subtree ends at the first later
/// frame that is no deeper (or at the end), which then writes it, after its
/// deeper descendants still open: children before their parent, sibling
/// subtrees in order.
fn write_stack<'a>(
    out: &mut String,
    frames: &'a [DumpFrame],
    frame_text: &mut TextCache<'a, DumpFrame>,
    open: &mut Vec<&'a DumpFrame>,
) {
    let mut write = |out: &mut String, frame: &'a DumpFrame| {
        out.push_str(frame_text.text(frame, frame_hash(frame), same_frame_text, write_frame));
    };
    open.clear();
    for frame in frames {
        while let Some(&top) = open.last()
            && top.depth >= frame.depth
        {
            open.pop();
            write(out, top);
        }
        open.push(frame);
    }
    while let Some(top) = open.pop() {
        write(out, top);
    }
}

/// Renders tasks as text; what one render reuses from task to task.
struct TextRenderer<'a> {
    /// Each distinct frame's lines (see [`write_frame`]).
    frames: TextCache<'a, DumpFrame>,
    /// Each distinct stack's lines (see [`TextRenderer::write_frames`]).
    stacks: TextCache<'a, [DumpFrame]>,
    /// Scratch stack of [`write_stack`].
    open: Vec<&'a DumpFrame>,
}

impl<'a> TextRenderer<'a> {
    fn new() -> Self {
        TextRenderer {
            frames: TextCache::new(8),
            stacks: TextCache::new(6),
            open: Vec::new(),
        }
    }

    /// Writes a task's frames innermost first (see [`write_stack`]),
    /// copying the text when the same stack was rendered before.
    fn write_frames(&mut self, out: &mut impl TextOut, frames: &'a [DumpFrame]) -> fmt::Result {
        let (frame_text, open) = (&mut self.frames, &mut self.open);
        out.put(self.stacks.text(
            frames,
            stack_hash(frames),
            same_stack_text,
            |text, frames| write_stack(text, frames, frame_text, open),
        ))
    }
}

/// `7 "handler"`, or `7` for an unnamed task.
fn write_id_and_name(out: &mut String, t: &TaskInfo) {
    write_int(out, t.id);
    if let Some(name) = &t.name {
        out.push(' ');
        write_quoted(out, name);
    }
}

/// `task 7 "handler" [idle 2.3s, 4 polls]:`
fn write_header(out: &mut String, t: &TaskInfo) {
    out.push_str("task ");
    write_id_and_name(out, t);
    out.push_str(" [");
    out.push_str(t.state.as_str());
    out.push(' ');
    write_duration(out, u128::from(t.state_ms));
    out.push_str(", ");
    write_int(out, t.polls);
    out.push_str(" polls]:\n");
}

/// The lines after the frames: why frames are missing, then where the task
/// came from.
fn write_footer(out: &mut String, t: &TaskInfo) {
    if t.stack_unavailable {
        out.push_str("  (stack changed during every copy; not shown)\n");
    }
    if t.truncated > 0 {
        out.push_str("  ... ");
        write_int(out, t.truncated);
        out.push_str(" more frames not published\n");
    }
    match (&t.spawned_at, t.parent) {
        (Some(at), parent) => {
            out.push_str("  spawned at ");
            write_location(out, at);
            if let Some(p) = parent {
                out.push_str(" by task ");
                write_int(out, p);
            }
            out.push('\n');
        }
        (None, Some(p)) => {
            out.push_str("  spawned by task ");
            write_int(out, p);
            out.push('\n');
        }
        (None, None) => {
            if let Some(def) = t.frames.first().and_then(|r| r.defined_at.as_ref()) {
                out.push_str("  root future defined at ");
                write_location(out, def);
                out.push('\n');
            }
        }
    }
}

/// `3 tasks [idle 1.2s..2.3s]: 4 "a", 5, 9 "b"`
fn write_group_header(out: &mut String, members: &[&TaskInfo]) {
    let min = members.iter().map(|t| t.state_ms).min().unwrap_or(0);
    let max = members.iter().map(|t| t.state_ms).max().unwrap_or(0);
    write_int(out, members.len());
    out.push_str(" tasks [");
    out.push_str(members[0].state.as_str());
    out.push(' ');
    write_duration(out, u128::from(min));
    out.push_str("..");
    write_duration(out, u128::from(max));
    out.push_str("]: ");
    for (i, t) in members.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_id_and_name(out, t);
    }
    out.push('\n');
}

/// Where the renderer puts text: small pieces (headers, footers) are
/// appended to a buffer, and the lines of a stack, the bulk of a dump, are
/// handed over whole from the renderer's cache.
trait TextOut {
    /// The buffer for small pieces.
    fn buf(&mut self) -> &mut String;
    /// Appends `text` after what `buf` holds.
    fn put(&mut self, text: &str) -> fmt::Result;
}

/// [`TaskDump::to_text`]: everything goes to the result.
impl TextOut for String {
    fn buf(&mut self) -> &mut String {
        self
    }

    fn put(&mut self, text: &str) -> fmt::Result {
        self.push_str(text);
        Ok(())
    }
}

/// `Display`: small pieces gather in `buf`, which goes to the formatter
/// before each stack's lines and at the end; a stack's lines go straight
/// from the cache to the formatter. So the text is copied once, in two
/// calls into the formatter per task.
struct FormatterOut<'f, 'g> {
    f: &'f mut fmt::Formatter<'g>,
    buf: String,
}

impl FormatterOut<'_, '_> {
    /// Hands over what `buf` holds.
    fn flush(&mut self) -> fmt::Result {
        if !self.buf.is_empty() {
            self.f.write_str(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl TextOut for FormatterOut<'_, '_> {
    fn buf(&mut self) -> &mut String {
        &mut self.buf
    }

    fn put(&mut self, text: &str) -> fmt::Result {
        self.flush()?;
        self.f.write_str(text)
    }
}

impl TaskDump {
    /// The Go-style text form, as `Display` writes it (`coalesce` is what
    /// `{:#}` selects), in one `String` allocated for it up front.
    pub fn to_text(&self, coalesce: bool) -> String {
        let frames: usize = self.tasks.iter().map(|t| t.frames.len()).sum();
        let mut out = String::with_capacity(self.tasks.len() * 96 + frames * 112);
        // Writing to a `String` cannot fail.
        let _ = self.render(&mut out, coalesce);
        out
    }

    /// Renders the text form into `out`.
    fn render(&self, out: &mut impl TextOut, coalesce: bool) -> fmt::Result {
        let mut r = TextRenderer::new();
        if !coalesce {
            for (i, t) in self.tasks.iter().enumerate() {
                if i > 0 {
                    out.buf().push('\n');
                }
                write_header(out.buf(), t);
                r.write_frames(out, &t.frames)?;
                write_footer(out.buf(), t);
            }
            return Ok(());
        }
        // Groups, by the id of their first task; `index` finds a task's
        // group by its key.
        type Key<'a> = (TaskState, &'a [DumpFrame], Option<&'a SourceLocation>);
        let mut groups: BTreeMap<u64, (Key<'_>, Vec<&TaskInfo>)> = BTreeMap::new();
        let mut index: HashMap<Key<'_>, u64> = HashMap::new();
        for t in &self.tasks {
            let key: Key<'_> = (t.state, &t.frames, t.spawned_at.as_ref());
            match index.get(&key) {
                Some(first) => groups.get_mut(first).map(|g| g.1.push(t)).unwrap_or(()),
                None => {
                    index.insert(key, t.id);
                    groups.insert(t.id, (key, vec![t]));
                }
            }
        }
        for (i, (_, members)) in groups.values().enumerate() {
            if i > 0 {
                out.buf().push('\n');
            }
            let first = members[0];
            if members.len() == 1 {
                write_header(out.buf(), first);
            } else {
                write_group_header(out.buf(), members);
            }
            r.write_frames(out, &first.frames)?;
            write_footer(out.buf(), first);
        }
        Ok(())
    }
}

impl fmt::Display for TaskDump {
    /// The Go-style text form. `{:#}` coalesces tasks whose state, stack
    /// and spawn site are identical into one entry with a count.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let coalesce = f.alternate();
        let mut out = FormatterOut {
            f,
            buf: String::with_capacity(256),
        };
        self.render(&mut out, coalesce)?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    //! The text form against a straightforward `format!` renderer (the one
    //! the fast renderer replaced, kept here as the reference): byte for
    //! byte, on dumps built to reach every branch and on random ones.

    use super::*;

    /// The reference: every piece through `core::fmt`, frames by a
    /// recursive walk, nothing cached.
    mod reference {
        use super::super::*;

        pub(super) fn duration(d: Duration) -> String {
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

        fn frames(f: &mut String, frames: &[DumpFrame]) {
            fn subtree_end(frames: &[DumpFrame], i: usize) -> usize {
                let d = frames[i].depth;
                let mut j = i + 1;
                while j < frames.len() && frames[j].depth > d {
                    j += 1;
                }
                j
            }
            fn walk(f: &mut String, frames: &[DumpFrame], i: usize) {
                let end = subtree_end(frames, i);
                let mut c = i + 1;
                while c < end {
                    walk(f, frames, c);
                    c = subtree_end(frames, c);
                }
                let fr = &frames[i];
                let pad = 2 * (fr.depth as usize + 1);
                let _ = writeln!(f, "{:pad$}{} [async]", "", fr.function);
                let pad = pad + 4;
                let _ = match (&fr.awaiting_at, fr.running) {
                    (Some(at), _) => writeln!(f, "{:pad$}awaiting at {at}", ""),
                    (None, true) => writeln!(f, "{:pad$}running", ""),
                    (None, false) => {
                        writeln!(f, "{:pad$}not suspended at an instrumented .await", "")
                    }
                };
            }
            let mut i = 0;
            while i < frames.len() {
                walk(f, frames, i);
                i = subtree_end(frames, i);
            }
        }

        fn footer(f: &mut String, t: &TaskInfo) {
            if t.stack_unavailable {
                let _ = writeln!(f, "  (stack changed during every copy; not shown)");
            }
            if t.truncated > 0 {
                let _ = writeln!(f, "  ... {} more frames not published", t.truncated);
            }
            let _ = match (&t.spawned_at, t.parent) {
                (Some(at), Some(p)) => writeln!(f, "  spawned at {at} by task {p}"),
                (Some(at), None) => writeln!(f, "  spawned at {at}"),
                (None, Some(p)) => writeln!(f, "  spawned by task {p}"),
                (None, None) => match t.frames.first().and_then(|r| r.defined_at.as_ref()) {
                    Some(def) => writeln!(f, "  root future defined at {def}"),
                    None => Ok(()),
                },
            };
        }

        fn header(f: &mut String, t: &TaskInfo) {
            let _ = write!(f, "task {}", t.id);
            if let Some(n) = &t.name {
                let _ = write!(f, " {n:?}");
            }
            let _ = writeln!(
                f,
                " [{} {}, {} polls]:",
                t.state,
                duration(t.time_in_state()),
                t.polls
            );
        }

        pub(super) fn text(dump: &TaskDump, coalesce: bool) -> String {
            let mut f = String::new();
            if !coalesce {
                for (i, t) in dump.tasks.iter().enumerate() {
                    if i > 0 {
                        f.push('\n');
                    }
                    header(&mut f, t);
                    frames(&mut f, &t.frames);
                    footer(&mut f, t);
                }
                return f;
            }
            type Key<'a> = (TaskState, &'a [DumpFrame], Option<&'a SourceLocation>);
            let mut groups: BTreeMap<u64, (Key<'_>, Vec<&TaskInfo>)> = BTreeMap::new();
            let mut index: Vec<(Key<'_>, u64)> = Vec::new();
            for t in &dump.tasks {
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
                    f.push('\n');
                }
                let first = members[0];
                if members.len() == 1 {
                    header(&mut f, first);
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
                    let _ = writeln!(
                        f,
                        "{} tasks [{} {}..{}]: {}",
                        members.len(),
                        first.state,
                        duration(Duration::from_millis(min)),
                        duration(Duration::from_millis(max)),
                        ids.join(", ")
                    );
                }
                frames(&mut f, &first.frames);
                footer(&mut f, first);
            }
            f
        }
    }

    /// Every text form of `dump` is the reference's, byte for byte.
    fn assert_same_text(dump: &TaskDump) {
        let plain = reference::text(dump, false);
        let coalesced = reference::text(dump, true);
        assert_eq!(dump.to_text(false), plain);
        assert_eq!(dump.to_string(), plain);
        assert_eq!(dump.to_text(true), coalesced);
        assert_eq!(format!("{dump:#}"), coalesced);
    }

    fn at(file: &str, line: u32, column: u32) -> SourceLocation {
        SourceLocation {
            file: Cow::Owned(file.to_string()),
            line,
            column,
        }
    }

    fn frame(depth: u32, function: &str, awaiting: Option<(u32, u32)>, running: bool) -> DumpFrame {
        DumpFrame {
            depth,
            function: Cow::Owned(function.to_string()),
            defined_at: Some(at("src/lib.rs", depth + 1, 1)),
            awaiting_at: awaiting.map(|(l, c)| at("src/lib.rs", l, c)),
            running,
        }
    }

    fn task(id: u64, frames: Vec<DumpFrame>) -> TaskInfo {
        TaskInfo {
            id,
            name: None,
            state: TaskState::Idle,
            state_ms: 0,
            polls: 1,
            wakes: 0,
            parent: None,
            spawned_at: None,
            root: None,
            frames,
            truncated: 0,
            stack_unavailable: false,
        }
    }

    fn dump_of(tasks: Vec<TaskInfo>) -> TaskDump {
        TaskDump {
            version: DUMP_FORMAT_VERSION,
            tasks,
            torn_copies: 0,
            untracked_roots: 0,
        }
    }

    #[test]
    fn durations_match_the_reference_at_every_boundary() {
        let ms = [
            0,
            1,
            999,
            1_000,
            1_099,
            1_100,
            59_999,
            60_000,
            61_000,
            3_599_999,
            3_600_000,
            3_660_000,
            u64::MAX,
        ];
        for ms in ms {
            let d = Duration::from_millis(ms);
            assert_eq!(format_duration(d), reference::duration(d), "{ms} ms");
        }
        // Beyond u64 milliseconds (the u128 path).
        assert_eq!(
            format_duration(Duration::MAX),
            reference::duration(Duration::MAX)
        );
    }

    #[test]
    fn every_header_body_and_footer_branch_matches_the_reference() {
        let chain = |n: u32| -> Vec<DumpFrame> {
            (0..n)
                .map(|d| frame(d, &format!("app::level{d}"), Some((10 + d, 5)), false))
                .collect()
        };
        let mut named = task(1, chain(3));
        named.name = Some("worker \"7\"\n\tä\\".into());
        named.state_ms = 2_345;
        let mut plain_name = task(2, chain(3));
        plain_name.name = Some("plain-name".into());
        plain_name.state = TaskState::Running;
        plain_name.frames[2].awaiting_at = None;
        plain_name.frames[2].running = true;
        plain_name.frames[1].running = true;
        plain_name.frames[0].running = true;
        let mut not_at_await = task(3, chain(2));
        not_at_await.frames[1].awaiting_at = None;
        not_at_await.state = TaskState::Scheduled;
        not_at_await.state_ms = 7_380_000;
        let mut unavailable = task(4, Vec::new());
        unavailable.stack_unavailable = true;
        unavailable.spawned_at = Some(at("src/main.rs", 3, 9));
        unavailable.parent = Some(1);
        let mut truncated = task(5, chain(4));
        truncated.truncated = 12;
        truncated.spawned_at = Some(at("src/main.rs", 4, 9));
        let mut by_parent = task(6, chain(1));
        by_parent.parent = Some(2);
        let mut no_defined = task(7, chain(1));
        no_defined.frames[0].defined_at = None;
        // Deeper than the padding constant: indentation beyond 64 spaces.
        let deep = task(8, chain(40));
        // A join: branches at the same depth, a branch with its own child,
        // then a depth that skips a level and one that goes back to the
        // root's depth (a second top-level frame).
        let depths = [0, 1, 2, 1, 1, 3, 2, 0, 1];
        let join = task(
            9,
            depths
                .iter()
                .enumerate()
                .map(|(i, &d)| frame(d, &format!("app::f{i}"), Some((i as u32, 1)), false))
                .collect(),
        );
        // Starts deeper than it continues.
        let odd = task(
            10,
            vec![
                frame(2, "app::a", Some((1, 1)), false),
                frame(0, "app::b", None, true),
                frame(1, "app::c", None, false),
            ],
        );
        let empty = task(11, Vec::new());
        // Each a name that needs escaping for one reason only.
        let escaped = [
            "back\\slash",
            "tab\there",
            "größe",
            "quote\"d",
            "\u{301}accent",
        ]
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let mut t = task(20 + i as u64, chain(1));
            t.name = Some(name.to_string());
            t
        });
        assert_same_text(&dump_of(escaped.collect()));
        assert_same_text(&dump_of(vec![
            named,
            plain_name,
            not_at_await,
            unavailable,
            truncated,
            by_parent,
            no_defined,
            deep,
            join,
            odd,
            empty,
        ]));
        assert_same_text(&dump_of(Vec::new()));
    }

    /// Frames that a cache could confuse (same lengths, lines and columns,
    /// so the same slot) keep their own text, and equal frames in separate
    /// allocations share it.
    #[test]
    fn frames_that_look_alike_keep_their_own_text() {
        let tasks = (0..6)
            .map(|i| {
                let f = if i % 2 == 0 { "app::x" } else { "app::y" };
                let file = if i % 3 == 0 { "src/a.rs" } else { "src/b.rs" };
                let mut fr = frame(0, f, Some((4, 2)), false);
                fr.awaiting_at = Some(at(file, 4, 2));
                task(i, vec![fr])
            })
            .collect();
        let dump = dump_of(tasks);
        assert_same_text(&dump);
        let text = dump.to_text(false);
        assert_eq!(text.matches("app::x [async]").count(), 3);
        assert_eq!(text.matches("awaiting at src/a.rs:4:2").count(), 2);
    }

    /// Random dumps: a few functions, files, depths and states, so that
    /// stacks, frames and groups repeat and collide in every way.
    #[test]
    fn random_dumps_match_the_reference() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let names = [
            "app::a",
            "app::b",
            "app::cc",
            "<future at x.rs:1:1>",
            "a::b",
        ];
        let files = ["src/a.rs", "src/b.rs", "x.rs"];
        for round in 0..300 {
            let tasks = (0..next(40))
                .map(|id| {
                    let mut depth = 0u32;
                    let frames = (0..next(12))
                        .map(|i| {
                            if i > 0 {
                                depth = match next(4) {
                                    0 => depth.saturating_sub(1),
                                    1 => depth,
                                    _ => depth + 1,
                                };
                            }
                            let awaiting = match next(4) {
                                0 => None,
                                _ => Some(at(
                                    files[next(3) as usize],
                                    next(3) as u32 + 1,
                                    next(2) as u32 + 1,
                                )),
                            };
                            DumpFrame {
                                depth,
                                function: Cow::Owned(names[next(5) as usize].to_string()),
                                defined_at: (next(4) > 0).then(|| at("src/def.rs", 1, 1)),
                                awaiting_at: awaiting,
                                running: next(2) == 0,
                            }
                        })
                        .collect();
                    let mut t = task(id * 3 + next(3), frames);
                    t.name = match next(3) {
                        0 => None,
                        1 => Some(format!("t{}", next(4))),
                        _ => Some("q\"uote".to_string()),
                    };
                    t.state = [TaskState::Idle, TaskState::Running, TaskState::Scheduled]
                        [next(3) as usize];
                    t.state_ms = next(5_000_000);
                    t.polls = next(100);
                    t.parent = (next(2) == 0).then(|| next(10));
                    t.spawned_at = (next(2) == 0).then(|| at(files[next(3) as usize], 9, 9));
                    t.truncated = if next(8) == 0 { 3 } else { 0 };
                    t.stack_unavailable = next(10) == 0;
                    t
                })
                .collect();
            let dump = dump_of(tasks);
            let plain = reference::text(&dump, false);
            assert_eq!(dump.to_text(false), plain, "round {round}");
            assert_eq!(dump.to_string(), plain, "round {round}");
            assert_eq!(
                format!("{dump:#}"),
                reference::text(&dump, true),
                "round {round}"
            );
        }
    }

    /// A real dump of this process (whatever tasks the other tests left
    /// running), in every form.
    #[test]
    fn a_live_dump_matches_the_reference() {
        assert_same_text(&dump());
    }

    #[test]
    fn dump_where_keeps_exactly_the_tasks_it_selects() {
        use crate::TracedExt;
        use std::task::{Context, Waker};

        let mut a = Box::pin(std::future::pending::<()>().traced_named("where-a"));
        let mut b = Box::pin(std::future::pending::<()>().traced_named("where-b"));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(a.as_mut().poll(&mut cx).is_pending());
        assert!(b.as_mut().poll(&mut cx).is_pending());
        let (ia, ib) = (a.task_id().unwrap(), b.task_id().unwrap());
        let ours = |id: u64| id == ia || id == ib;

        let one = dump_where(|id, _, _| id == ia);
        assert_eq!(one.tasks.len(), 1);
        let task = &one.tasks[0];
        assert_eq!((task.id, task.name.as_deref()), (ia, Some("where-a")));
        assert_eq!(task.frames.len(), 1);
        assert_eq!(task.frames[0].function, "where-a");

        let running = dump_where(|id, state, _| ours(id) && state == TaskState::Running);
        assert!(running.tasks.is_empty());
        let idle = dump_where(|id, state, _| ours(id) && state == TaskState::Idle);
        let ids: Vec<u64> = idle.tasks.iter().map(|t| t.id).collect();
        assert_eq!(ids, [ia, ib]);
    }
}
