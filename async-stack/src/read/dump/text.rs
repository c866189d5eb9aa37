//! The Go-style text form of a dump.
//!
//! A dump of 10,000 tasks at depth 9 is about 10 MB of text, so the writers
//! below append plain slices and `itoa` integers to a `String` (no
//! `core::fmt` per field, no allocation per task), and each distinct frame
//! and each distinct stack is formatted once per render and copied after
//! that (`cache.rs`).
//!
//! One renderer, [`TextRenderer`], writes a task's entry (header, frames,
//! footer) wherever the text goes: into one `String` ([`TaskDump::to_text`]),
//! a formatter (`Display` of [`TaskDump`] and of [`TaskInfo`]), or, task by
//! task, an [`io::Write`] through a bounded buffer ([`TextStream`], for the
//! streaming dumps of `stream.rs`). Its caches keep copies of what they
//! cached, not references, so they outlive the task they were filled from.
//!
//! The output is linear in the dump's size whatever it holds: a frame's
//! indentation stops at `2 * STACK_CAPACITY` columns (`MAX_FRAME_INDENT`),
//! even for a depth that only a dump built in code can hold.

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::io;
use std::time::Duration;

use super::cache::{
    RenderCache, Rendering, frame_hash, same_str, stack_hash, store_frame, store_stack,
};
use super::{DumpFrame, ResourceWait, SourceLocation, TaskDump, TaskInfo};
use crate::task::{STACK_CAPACITY, TaskState};
use crate::waits::report::ResourceKind;

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

/// The deepest indentation of a frame's first line: `2 * STACK_CAPACITY`
/// columns, the indentation of the deepest frame a task's published stack
/// holds (depth `STACK_CAPACITY - 1`).
const MAX_FRAME_INDENT: usize = 2 * STACK_CAPACITY;

/// The indentation of a frame's first line at `depth`: two columns per
/// level, capped so that a deep tree stays within [`MAX_FRAME_INDENT`];
/// the lines under the frame are four columns further in.
fn frame_pad(depth: u32) -> usize {
    2 * ((depth as usize).min(MAX_FRAME_INDENT / 2 - 1) + 1)
}

/// Appends one frame's two lines, indented by its depth: two columns per
/// level, at most [`MAX_FRAME_INDENT`] (a deeper frame, which only a dump
/// built in code can hold, is shown at that indentation, so that no depth
/// makes a line longer than its text plus that much).
fn write_frame(out: &mut String, frame: &DumpFrame) {
    let pad = frame_pad(frame.depth);
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

/// Frames, as the text form shows them ([`write_frame`]).
struct FrameText;

impl Rendering for FrameText {
    type Key = DumpFrame;
    type Owned = DumpFrame;

    #[inline]
    fn same(key: &DumpFrame, seen: &DumpFrame) -> bool {
        same_frame_text(key, seen)
    }

    fn store(key: &DumpFrame, slot: &mut Option<DumpFrame>) {
        store_frame(key, slot);
    }
}

/// Stacks, as the text form shows them ([`TextRenderer::write_frames`]):
/// frame by frame, in order.
struct StackText;

impl Rendering for StackText {
    type Key = [DumpFrame];
    type Owned = Vec<DumpFrame>;

    #[inline]
    fn same(key: &[DumpFrame], seen: &Vec<DumpFrame>) -> bool {
        key.len() == seen.len() && key.iter().zip(seen).all(|(a, b)| same_frame_text(a, b))
    }

    fn store(key: &[DumpFrame], slot: &mut Option<Vec<DumpFrame>>) {
        store_stack(key, slot);
    }
}

/// Writes `frames` innermost first, each through `write`: a post-order
/// walk of the pre-order tree, indented by depth, so a linear stack reads
/// top-down from the leaf and each pending branch appears (in source order)
/// above its parent.
///
/// One pass: `open` holds the indices of the frames whose subtree has not
/// ended, with strictly increasing depths. A frame's subtree ends at the
/// first later frame that is no deeper (or at the end), which then writes
/// it, after its deeper descendants still open: children before their
/// parent, sibling subtrees in order.
fn write_stack(
    out: &mut String,
    frames: &[DumpFrame],
    open: &mut Vec<usize>,
    mut write: impl FnMut(&mut String, usize, &DumpFrame),
) {
    open.clear();
    for (i, frame) in frames.iter().enumerate() {
        while let Some(&top) = open.last()
            && frames[top].depth >= frame.depth
        {
            open.pop();
            write(out, top, &frames[top]);
        }
        open.push(i);
    }
    while let Some(top) = open.pop() {
        write(out, top, &frames[top]);
    }
}

/// `waiting for Mutex created at src/bank.rs:12:15, held by task 7
/// (acquired at src/bank.rs:40:9, 3.2s ago)`, indented under a frame at
/// `depth` (`None`: at the task's level).
fn write_wait(out: &mut String, depth: Option<u32>, w: &ResourceWait) {
    let pad = match depth {
        Some(d) => frame_pad(d) + 4,
        None => 2,
    };
    write_pad(out, pad);
    out.push_str("waiting for ");
    out.push_str(w.resource.as_str());
    if w.resource == ResourceKind::JoinHandle {
        if let Some(id) = w.tokio_task {
            out.push_str(" of tokio task ");
            write_int(out, id);
        }
        out.push_str(" spawned at ");
        write_location(out, &w.created_at);
    } else {
        out.push_str(" created at ");
        write_location(out, &w.created_at);
        if w.holders.is_empty() {
            out.push_str(", free (not taken yet)");
        }
        for (i, h) in w.holders.iter().enumerate() {
            out.push_str(if i == 0 { ", held by " } else { " and " });
            if h.task == 0 {
                out.push_str("code outside traced tasks");
            } else {
                out.push_str("task ");
                write_int(out, h.task);
            }
            out.push_str(" (acquired at ");
            write_location(out, &h.acquired_at);
            // Code outside traced tasks is not timed (see `held_ms`).
            if h.task != 0 {
                out.push_str(", ");
                write_duration(out, u128::from(h.held_ms));
                out.push_str(" ago");
            }
            out.push(')');
        }
    }
    out.push_str(", for ");
    write_duration(out, u128::from(w.waiting_ms));
    out.push('\n');
}

/// A task's frames (see [`write_stack`]), each wait under its frame (see
/// [`TaskInfo::wait_frames`]); waits of roots without frames after them.
fn write_frames_with_waits(out: &mut String, t: &TaskInfo, open: &mut Vec<usize>) {
    let waits = t.wait_frames();
    write_stack(out, &t.frames, open, |out, i, frame| {
        write_frame(out, frame);
        for (_, w) in waits.iter().filter(|(at, _)| *at == Some(i)) {
            write_wait(out, Some(frame.depth), w);
        }
    });
    for (_, w) in waits.iter().filter(|(at, _)| at.is_none()) {
        write_wait(out, None, w);
    }
}

/// The two caches of a [`TextRenderer`] that renders many tasks.
struct Caches {
    /// Each distinct frame's lines (see [`write_frame`]).
    frames: RenderCache<FrameText>,
    /// Each distinct stack's lines (see [`TextRenderer::write_frames`]).
    stacks: RenderCache<StackText>,
}

/// Renders tasks as text; what one render reuses from task to task. Its
/// size does not depend on how many tasks it renders: a dump streamed
/// task by task through one renderer holds one task's text at a time.
pub(super) struct TextRenderer {
    /// `None` for a renderer of one task, which renders its frames
    /// directly.
    caches: Option<Caches>,
    /// Scratch stack of [`write_stack`].
    open: Vec<usize>,
}

impl TextRenderer {
    /// A renderer for many tasks: frames and stacks that repeat are
    /// rendered once.
    pub(super) fn new() -> Self {
        TextRenderer {
            caches: Some(Caches {
                frames: RenderCache::new(8),
                stacks: RenderCache::new(6),
            }),
            open: Vec::new(),
        }
    }

    /// A renderer for one task, with nothing to reuse.
    fn uncached() -> Self {
        TextRenderer {
            caches: None,
            open: Vec::new(),
        }
    }

    /// Writes a task's frames innermost first (see [`write_stack`]),
    /// copying the text when the same stack was rendered before.
    fn write_frames(&mut self, out: &mut impl TextOut, frames: &[DumpFrame]) -> fmt::Result {
        let open = &mut self.open;
        let Some(Caches {
            frames: frame_text,
            stacks,
        }) = &mut self.caches
        else {
            write_stack(out.buf(), frames, open, |out, _, frame| {
                write_frame(out, frame)
            });
            return Ok(());
        };
        out.put(
            stacks.text(frames, stack_hash(frames, frame_hash), |text, frames| {
                write_stack(text, frames, open, |text, _, frame| {
                    text.push_str(frame_text.text(frame, frame_hash(frame), write_frame));
                })
            }),
        )
    }

    /// Writes one task as the plain text form shows it: header, frames
    /// innermost first, footer. Every line ends with `\n`; tasks in a dump
    /// are separated by one empty line, which is the caller's to write.
    pub(super) fn write_task(&mut self, out: &mut impl TextOut, t: &TaskInfo) -> fmt::Result {
        write_header(out.buf(), t);
        if t.waits.is_empty() {
            self.write_frames(out, &t.frames)?;
        } else {
            // Waits are the task's own: its stack is not one to share.
            write_frames_with_waits(out.buf(), t, &mut self.open);
        }
        write_footer(out.buf(), t);
        Ok(())
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

/// `task 7 "handler" [idle 2.3s, 4 polls]:`, or for a tokio task
/// `task 7 "handler" (tokio task 34) [idle 2.3s, 4 polls]:`, and with
/// several roots `task 7 (tokio task 34; roots 7, 12) [idle 2.3s, 4 polls]:`.
fn write_header(out: &mut String, t: &TaskInfo) {
    out.push_str("task ");
    write_id_and_name(out, t);
    if let Some(tokio_id) = t.tokio_id {
        out.push_str(" (tokio task ");
        write_int(out, tokio_id);
        if t.branches.len() > 1 {
            out.push_str("; roots ");
            for (i, &b) in t.branches.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_int(out, b);
            }
        }
        out.push(')');
    }
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
    } else if t.not_polled_yet() {
        out.push_str("  (not polled yet)\n");
    }
    if t.hidden_frames > 0 {
        out.push_str("  ... ");
        write_int(out, t.hidden_frames);
        out.push_str(" more frames not shown\n");
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
pub(super) trait TextOut {
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

/// How much text a [`TextStream`] gathers before it writes: large enough
/// that an unbuffered target (stderr, a file) sees few writes, small
/// enough to stay in cache.
const STREAM_CHUNK: usize = 32 * 1024;

/// The text form written task by task to an [`io::Write`]: what
/// [`super::write_text`] and [`super::LiveTasks::write_text`] use.
///
/// Everything (headers, footers and the cached lines of stacks) is
/// appended to one buffer, handed to the target whenever it holds
/// [`STREAM_CHUNK`] bytes, so the target sees a few large writes and the
/// memory used is the buffer, the renderer's caches and one task, however
/// many tasks are written.
pub(super) struct TextStream<W: io::Write> {
    out: W,
    buf: String,
    renderer: TextRenderer,
    /// Tasks written so far.
    tasks: usize,
    /// The first error of the target; the stream writes nothing after it.
    error: Option<io::Error>,
}

impl<W: io::Write> TextStream<W> {
    pub(super) fn new(out: W) -> Self {
        TextStream {
            out,
            buf: String::with_capacity(STREAM_CHUNK + STREAM_CHUNK / 4),
            renderer: TextRenderer::new(),
            tasks: 0,
            error: None,
        }
    }

    /// Writes one task, after an empty line unless it is the first: the
    /// same text [`TaskDump`]'s `Display` writes for it.
    pub(super) fn task(&mut self, t: &TaskInfo) {
        if self.error.is_some() {
            return;
        }
        if self.tasks > 0 {
            self.buf.push('\n');
        }
        self.tasks += 1;
        // Writing to a `String` cannot fail.
        let _ = self.renderer.write_task(&mut self.buf, t);
        if self.buf.len() >= STREAM_CHUNK {
            self.write_buf();
        }
    }

    /// Hands what the buffer holds to the target.
    fn write_buf(&mut self) {
        if let Err(e) = self.out.write_all(self.buf.as_bytes()) {
            self.error = Some(e);
        }
        self.buf.clear();
    }

    /// Writes what is left and flushes the target; the first error the
    /// target gave, if any.
    pub(super) fn finish(mut self) -> io::Result<()> {
        if self.error.is_none() && !self.buf.is_empty() {
            self.write_buf();
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => self.out.flush(),
        }
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
                r.write_task(out, t)?;
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
                // A task alone: exactly its plain entry, waits included.
                r.write_task(out, first)?;
                continue;
            }
            write_group_header(out.buf(), members);
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

impl fmt::Display for TaskInfo {
    /// The task as the text form of a dump shows it: exactly its entry in
    /// `dump().to_string()` (header, frames innermost first, then where it
    /// was spawned), every line ending in `\n`.
    ///
    /// ```
    /// use async_stack::dump::{DumpFrame, SourceLocation};
    /// use async_stack::{TaskInfo, TaskState};
    ///
    /// let at = |line| Some(SourceLocation { file: "src/app.rs".into(), line, column: 9 });
    /// let task = TaskInfo {
    ///     id: 7,
    ///     tokio_id: Some(34),
    ///     branches: vec![7],
    ///     name: Some("handler".into()),
    ///     state: TaskState::Idle,
    ///     state_ms: 2_345,
    ///     polls: 4,
    ///     wakes: 3,
    ///     parent: Some(1),
    ///     spawned_at: at(90),
    ///     root: Some("app::handle".into()),
    ///     frames: vec![
    ///         DumpFrame { depth: 0, function: "app::handle".into(), defined_at: at(40), awaiting_at: at(41), running: false },
    ///         DumpFrame { depth: 1, function: "app::fetch".into(), defined_at: at(50), awaiting_at: at(52), running: false },
    ///     ],
    ///     hidden_frames: 0,
    ///     stack_unavailable: false,
    ///     waits: vec![],
    /// };
    /// assert_eq!(
    ///     task.to_string(),
    ///     "task 7 \"handler\" (tokio task 34) [idle 2.3s, 4 polls]:\n\
    ///     \x20   app::fetch [async]\n\
    ///     \x20       awaiting at src/app.rs:52:9\n\
    ///     \x20 app::handle [async]\n\
    ///     \x20     awaiting at src/app.rs:41:9\n\
    ///     \x20 spawned at src/app.rs:90:9 by task 1\n"
    /// );
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = FormatterOut {
            f,
            buf: String::with_capacity(256),
        };
        TextRenderer::uncached().write_task(&mut out, self)?;
        out.flush()
    }
}

/// Formats a duration the way dumps show it: `850ms`, `2.3s`, `4m12s`.
pub fn format_duration(d: Duration) -> String {
    let mut s = String::new();
    write_duration(&mut s, d.as_millis());
    s
}
