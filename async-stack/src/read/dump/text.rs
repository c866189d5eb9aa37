//! The Go-style text form of a dump.
//!
//! A dump of 10,000 tasks at depth 9 is about 10 MB of text, so the writers
//! below append plain slices and `itoa` integers to a `String` (no
//! `core::fmt` per field, no allocation per task), and each distinct frame
//! and each distinct stack is formatted once per render and copied after
//! that (`TextCache`).
//!
//! The output is linear in the dump's size whatever it holds: a frame's
//! indentation stops at `2 * STACK_CAPACITY` columns (`MAX_FRAME_INDENT`),
//! even for a depth that only a dump built in code can hold.

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::time::Duration;

use super::{DumpFrame, SourceLocation, TaskDump, TaskInfo};
use crate::task::{STACK_CAPACITY, TaskState};

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

/// Appends one frame's two lines, indented by its depth: two columns per
/// level, at most [`MAX_FRAME_INDENT`] (a deeper frame, which only a dump
/// built in code can hold, is shown at that indentation, so that no depth
/// makes a line longer than its text plus that much).
fn write_frame(out: &mut String, frame: &DumpFrame) {
    let shown_depth = (frame.depth as usize).min(MAX_FRAME_INDENT / 2 - 1);
    let pad = 2 * (shown_depth + 1);
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

/// Formats a duration the way dumps show it: `850ms`, `2.3s`, `4m12s`.
pub fn format_duration(d: Duration) -> String {
    let mut s = String::new();
    write_duration(&mut s, d.as_millis());
    s
}
