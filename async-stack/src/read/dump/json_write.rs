//! The JSON form of a dump, written: [`TaskDump::to_json`] and, task by
//! task, the streaming [`super::write_json`].
//!
//! The bytes are exactly those of `serde_json::to_string` on the dump
//! model (compact: no whitespace; fields in declaration order; strings
//! escaped as serde_json escapes them), which the tests check on arbitrary
//! dumps; `docs/task-dump.schema.json` describes them. The form is compact
//! because it is for programs: pretty-printed, a dump of 10,000 tasks at
//! depth 9 was 40 MB instead of 23, mostly indentation, and writing that
//! much fresh memory cost more than everything else. And serde's way, one
//! call through the formatter per key, value and punctuation mark, cost
//! about 0.4 µs per frame (34 ms for those 90,000 frames, against 3 ms
//! here, and 70 ms pretty-printed). So, as the text form
//! does (`text.rs`), the writer here appends slices and `itoa` integers to
//! a `String`, and renders each distinct frame and each distinct stack
//! once, copying the text where it repeats (`cache.rs`).
//!
//! One renderer, [`JsonRenderer`], writes a task's object wherever the
//! JSON goes: into one `String` ([`TaskDump::to_json`]), or, task by task,
//! into an [`io::Write`] through a bounded buffer ([`JsonStream`], for the
//! streaming dumps of `stream.rs`), in memory that does not grow with the
//! number of tasks.

use std::io;

use super::cache::{
    RenderCache, Rendering, frame_hash, same_str, stack_hash, store_frame, store_stack,
};
use super::{DumpFrame, DumpSummary, SourceLocation, TaskDump, TaskInfo};

/// Appends an integer in decimal.
#[inline]
fn write_int(out: &mut String, n: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it: `"` and
/// `\` with a backslash, the control characters U+0000 to U+001F as `\b`,
/// `\t`, `\n`, `\f`, `\r` or `\u00xx` (lowercase hex), everything else as
/// it is.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every byte escaped is ASCII, so `start..i` and `i + 1..` are on
        // character boundaries.
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Appends `"string"`, or `null`.
fn write_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => write_str(out, s),
        None => out.push_str("null"),
    }
}

/// Appends a location's object, or `null`.
fn write_location(out: &mut String, at: Option<&SourceLocation>) {
    let Some(at) = at else {
        out.push_str("null");
        return;
    };
    out.push_str("{\"file\":");
    write_str(out, &at.file);
    out.push_str(",\"line\":");
    write_int(out, at.line);
    out.push_str(",\"column\":");
    write_int(out, at.column);
    out.push('}');
}

/// Appends one frame's object.
fn write_frame(out: &mut String, f: &DumpFrame) {
    out.push_str("{\"depth\":");
    write_int(out, f.depth);
    out.push_str(",\"function\":");
    write_str(out, &f.function);
    out.push_str(",\"defined_at\":");
    write_location(out, f.defined_at.as_ref());
    out.push_str(",\"awaiting_at\":");
    write_location(out, f.awaiting_at.as_ref());
    out.push_str(if f.running {
        ",\"running\":true}"
    } else {
        ",\"running\":false}"
    });
}

/// Appends the `frames` array, each frame's text through `frame`.
fn write_frames(
    out: &mut String,
    frames: &[DumpFrame],
    mut frame: impl FnMut(&mut String, &DumpFrame),
) {
    out.push('[');
    for (i, f) in frames.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        frame(out, f);
    }
    out.push(']');
}

/// Whether two locations are equal, strings compared as in [`same_str`].
#[inline]
fn same_location(a: &Option<SourceLocation>, b: &Option<SourceLocation>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => {
            x.line == y.line && x.column == y.column && same_str(&x.file, &y.file)
        }
        (None, None) => true,
        _ => false,
    }
}

/// Whether two frames write the same JSON: equal in every field.
#[inline]
fn same_frame(a: &DumpFrame, b: &DumpFrame) -> bool {
    a.depth == b.depth
        && a.running == b.running
        && same_str(&a.function, &b.function)
        && same_location(&a.awaiting_at, &b.awaiting_at)
        && same_location(&a.defined_at, &b.defined_at)
}

/// A hash of every field of a frame (see [`frame_hash`]), `defined_at`
/// included.
#[inline]
fn json_frame_hash(f: &DumpFrame) -> u64 {
    let defined = f
        .defined_at
        .as_ref()
        .map_or(0, |at| u64::from(at.line) ^ u64::from(at.column) << 32);
    frame_hash(f) ^ defined.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
}

/// Frames, as JSON shows them ([`write_frame`]).
struct FrameJson;

impl Rendering for FrameJson {
    type Key = DumpFrame;
    type Owned = DumpFrame;

    #[inline]
    fn same(key: &DumpFrame, seen: &DumpFrame) -> bool {
        same_frame(key, seen)
    }

    fn store(key: &DumpFrame, slot: &mut Option<DumpFrame>) {
        store_frame(key, slot);
    }
}

/// Stacks, as JSON shows them: the whole `frames` array.
struct StackJson;

impl Rendering for StackJson {
    type Key = [DumpFrame];
    type Owned = Vec<DumpFrame>;

    #[inline]
    fn same(key: &[DumpFrame], seen: &Vec<DumpFrame>) -> bool {
        key.len() == seen.len() && key.iter().zip(seen).all(|(a, b)| same_frame(a, b))
    }

    fn store(key: &[DumpFrame], slot: &mut Option<Vec<DumpFrame>>) {
        store_stack(key, slot);
    }
}

/// Writes tasks as JSON objects; what a dump reuses from task to task:
/// the text of frames and stacks that repeat. Its size does not depend on
/// how many tasks it writes.
pub(super) struct JsonRenderer {
    frames: RenderCache<FrameJson>,
    stacks: RenderCache<StackJson>,
}

impl JsonRenderer {
    pub(super) fn new() -> Self {
        JsonRenderer {
            frames: RenderCache::new(8),
            stacks: RenderCache::new(6),
        }
    }

    /// Appends one task's object, as an item of the `tasks` array (the
    /// separator before it is the caller's).
    pub(super) fn write_task(&mut self, out: &mut String, t: &TaskInfo) {
        out.push_str("{\"id\":");
        write_int(out, t.id);
        out.push_str(",\"tokio_id\":");
        match t.tokio_id {
            Some(id) => write_int(out, id),
            None => out.push_str("null"),
        }
        out.push_str(",\"branches\":[");
        for (i, &b) in t.branches.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_int(out, b);
        }
        out.push_str("],\"name\":");
        write_opt_str(out, t.name.as_deref());
        out.push_str(",\"state\":\"");
        out.push_str(t.state.as_str());
        out.push_str("\",\"state_ms\":");
        write_int(out, t.state_ms);
        out.push_str(",\"polls\":");
        write_int(out, t.polls);
        out.push_str(",\"wakes\":");
        write_int(out, t.wakes);
        out.push_str(",\"parent\":");
        match t.parent {
            Some(p) => write_int(out, p),
            None => out.push_str("null"),
        }
        out.push_str(",\"spawned_at\":");
        write_location(out, t.spawned_at.as_ref());
        out.push_str(",\"root\":");
        write_opt_str(out, t.root.as_deref());
        out.push_str(",\"frames\":");
        let frame_cache = &mut self.frames;
        let hash = stack_hash(&t.frames, json_frame_hash);
        out.push_str(self.stacks.text(&t.frames, hash, |text, frames| {
            write_frames(text, frames, |text, f| {
                text.push_str(frame_cache.text(f, json_frame_hash(f), write_frame));
            });
        }));
        out.push_str(",\"hidden_frames\":");
        write_int(out, t.hidden_frames);
        out.push_str(if t.stack_unavailable {
            ",\"stack_unavailable\":true,\"waits\":"
        } else {
            ",\"stack_unavailable\":false,\"waits\":"
        });
        if t.waits.is_empty() {
            out.push_str("[]}");
        } else {
            // Rare (roots waiting for a wrapped lock): serde's own bytes.
            match serde_json::to_string(&t.waits) {
                Ok(waits) => out.push_str(&waits),
                Err(_) => out.push_str("[]"),
            }
            out.push('}');
        }
    }
}

/// Appends the document's start, up to the `tasks` array's `[`.
fn write_head(out: &mut String, version: u32) {
    out.push_str("{\"version\":");
    write_int(out, version);
    out.push_str(",\"tasks\":[");
}

/// Appends the separator before task number `index` (0-based) of the
/// `tasks` array.
fn write_separator(out: &mut String, index: usize) {
    if index > 0 {
        out.push(',');
    }
}

/// Appends the document's end, after the last task.
fn write_tail(out: &mut String, torn_copies: u64, untracked_roots: u64) {
    out.push_str("],\"torn_copies\":");
    write_int(out, torn_copies);
    out.push_str(",\"untracked_roots\":");
    write_int(out, untracked_roots);
    out.push('}');
}

impl TaskDump {
    /// The JSON form (schema: `docs/task-dump.schema.json`), compact (one
    /// line, no whitespace), in one `String` sized for it up front.
    ///
    /// The text is what `serde_json::to_string` writes for the dump (its
    /// `Serialize` impl), written directly: each distinct frame and stack
    /// is formatted once and copied where it repeats. To write many tasks
    /// without holding them all, nor all of their JSON,
    /// [`write_json`](super::write_json) streams the same form.
    ///
    /// ```
    /// use async_stack::TaskDump;
    ///
    /// let dump = TaskDump { version: 2, tasks: vec![], torn_copies: 0, untracked_roots: 0 };
    /// assert_eq!(
    ///     dump.to_json(),
    ///     r#"{"version":2,"tasks":[],"torn_copies":0,"untracked_roots":0}"#
    /// );
    /// ```
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(self.json_len());
        write_head(&mut out, self.version);
        let mut renderer = JsonRenderer::new();
        for (i, t) in self.tasks.iter().enumerate() {
            write_separator(&mut out, i);
            renderer.write_task(&mut out, t);
        }
        write_tail(&mut out, self.torn_copies, self.untracked_roots);
        out
    }
}

impl TaskDump {
    /// About the length of [`to_json`](Self::to_json)'s text, from above
    /// unless strings need escapes: keys and punctuation exactly, strings
    /// as they are, numbers at a few digits more than usual. (Growing the
    /// `String` of a large dump copies it, and touches twice its memory.)
    fn json_len(&self) -> usize {
        /// The bytes of a task's object and of a frame's besides their
        /// strings and numbers (with every location, and a separator).
        const TASK: usize = 186;
        const FRAME: usize = 128;
        /// Digits of a task's numbers (8 of them) and a frame's (5).
        const TASK_DIGITS: usize = 64;
        const FRAME_DIGITS: usize = 24;
        let file = |at: &Option<SourceLocation>| at.as_ref().map_or(0, |at| at.file.len());
        let tasks: usize = self
            .tasks
            .iter()
            .map(|t| {
                let frames: usize = t
                    .frames
                    .iter()
                    .map(|f| {
                        FRAME
                            + FRAME_DIGITS
                            + f.function.len()
                            + file(&f.defined_at)
                            + file(&f.awaiting_at)
                    })
                    .sum();
                TASK + TASK_DIGITS
                    + t.name.as_ref().map_or(0, String::len)
                    + t.root.as_ref().map_or(0, |r| r.len())
                    + file(&t.spawned_at)
                    + frames
            })
            .sum();
        128 + tasks
    }
}

/// How much JSON a [`JsonStream`] gathers before it writes (as for the
/// text form's stream).
const STREAM_CHUNK: usize = 32 * 1024;

/// The JSON form written task by task to an [`io::Write`]: what
/// [`super::write_json`] and [`super::LiveTasks::write_json`] use.
///
/// The head of the document is written first, each task's object as it
/// comes, and the tail, with the counts only known at the end, last. All
/// of it goes through one buffer, handed to the target whenever it holds
/// [`STREAM_CHUNK`] bytes, so the memory used is the buffer, the
/// renderer's caches and one task, however many tasks are written.
pub(super) struct JsonStream<W: io::Write> {
    out: W,
    buf: String,
    renderer: JsonRenderer,
    /// Tasks written so far.
    tasks: usize,
    /// The first error of the target; the stream writes nothing after it.
    error: Option<io::Error>,
}

impl<W: io::Write> JsonStream<W> {
    /// A stream of a document of format `version`.
    pub(super) fn new(out: W, version: u32) -> Self {
        let mut buf = String::with_capacity(STREAM_CHUNK + STREAM_CHUNK / 4);
        write_head(&mut buf, version);
        JsonStream {
            out,
            buf,
            renderer: JsonRenderer::new(),
            tasks: 0,
            error: None,
        }
    }

    /// Writes one task's object: the same text [`TaskDump::to_json`]
    /// writes for it.
    pub(super) fn task(&mut self, t: &TaskInfo) {
        if self.error.is_some() {
            return;
        }
        write_separator(&mut self.buf, self.tasks);
        self.tasks += 1;
        self.renderer.write_task(&mut self.buf, t);
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

    /// Writes the end of the document, with the counts of `summary`, and
    /// flushes the target; the first error the target gave, if any.
    pub(super) fn finish(mut self, summary: &DumpSummary) -> io::Result<()> {
        if self.error.is_none() {
            write_tail(&mut self.buf, summary.torn_copies, summary.untracked_roots);
            self.write_buf();
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => self.out.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use proptest::prelude::*;

    use super::*;
    use crate::task::TaskState;

    fn location() -> impl Strategy<Value = Option<SourceLocation>> {
        proptest::option::of((any::<String>(), any::<u32>(), any::<u32>()).prop_map(
            |(file, line, column)| SourceLocation {
                file: Cow::Owned(file),
                line,
                column,
            },
        ))
    }

    /// Strings with what JSON escapes: quotes, backslashes, every control
    /// character, DEL and non-ASCII.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[a-z:\"\\\\\u{0}-\u{1f}\u{7f}é✓]{0,12}",
            Just("app::f".to_owned()),
        ]
    }

    fn frame() -> impl Strategy<Value = DumpFrame> {
        (any::<u32>(), text(), location(), location(), any::<bool>()).prop_map(
            |(depth, function, defined_at, awaiting_at, running)| DumpFrame {
                depth,
                function: Cow::Owned(function),
                defined_at,
                awaiting_at,
                running,
            },
        )
    }

    fn task() -> impl Strategy<Value = TaskInfo> {
        (
            (
                any::<u64>(),
                proptest::option::of(text()),
                prop_oneof![
                    Just(TaskState::Running),
                    Just(TaskState::Idle),
                    Just(TaskState::Scheduled)
                ],
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
            ),
            (
                proptest::option::of(any::<u64>()),
                location(),
                proptest::option::of(text()),
                proptest::collection::vec(frame(), 0..4),
                any::<u32>(),
                any::<bool>(),
            ),
        )
            .prop_map(
                |(
                    (id, name, state, state_ms, polls, wakes),
                    (parent, spawned_at, root, frames, hidden_frames, stack_unavailable),
                )| TaskInfo {
                    id,
                    tokio_id: (id % 3 == 0).then_some(id / 3),
                    branches: vec![id],
                    name,
                    state,
                    state_ms,
                    polls,
                    wakes,
                    parent,
                    spawned_at,
                    root: root.map(Cow::Owned),
                    frames,
                    hidden_frames,
                    stack_unavailable,
                    waits: Vec::new(),
                },
            )
    }

    /// A dump of `tasks`, with each task repeated as a dump of many tasks
    /// repeats its stacks, so that the caches are hit as well as filled.
    fn dump() -> impl Strategy<Value = TaskDump> {
        (
            any::<u32>(),
            proptest::collection::vec((task(), 1..3usize), 0..4),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(version, tasks, torn_copies, untracked_roots)| {
                let tasks = tasks
                    .into_iter()
                    .flat_map(|(t, n)| std::iter::repeat_n(t, n))
                    .collect();
                TaskDump {
                    version,
                    tasks,
                    torn_copies,
                    untracked_roots,
                }
            })
    }

    /// What `stream` writes for `dump`'s tasks and counts.
    fn streamed(dump: &TaskDump) -> String {
        let mut out = Vec::new();
        let mut stream = JsonStream::new(&mut out, dump.version);
        for t in &dump.tasks {
            stream.task(t);
        }
        let summary = DumpSummary {
            tasks: dump.tasks.len(),
            torn_copies: dump.torn_copies,
            untracked_roots: dump.untracked_roots,
        };
        stream.finish(&summary).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn an_empty_dump_is_serde_jsons_too() {
        let d = TaskDump {
            version: 2,
            tasks: Vec::new(),
            torn_copies: 0,
            untracked_roots: 3,
        };
        let json = r#"{"version":2,"tasks":[],"torn_copies":0,"untracked_roots":3}"#;
        assert_eq!(d.to_json(), json);
        assert_eq!(streamed(&d), json);
    }

    /// A dump like a service's: numbers of a few digits, unescaped
    /// strings. `to_json` sizes its `String` for it from above, and by at
    /// most a tenth too much, so that it never grows (copying it).
    #[test]
    fn to_json_sizes_the_string_of_a_typical_dump_from_above() {
        let at = |line| {
            Some(SourceLocation {
                file: Cow::Borrowed("benches/src/dump_population.rs"),
                line,
                column: 17,
            })
        };
        let frames = (0..9)
            .map(|depth| DumpFrame {
                depth,
                function: Cow::Borrowed("benches::dump_population::chain::l9"),
                defined_at: at(30 + depth),
                awaiting_at: at(32 + depth),
                running: false,
            })
            .collect::<Vec<_>>();
        let tasks = (0..100)
            .map(|id| TaskInfo {
                id: 1000 + id,
                tokio_id: None,
                branches: vec![1000 + id],
                name: (id % 2 == 0).then(|| "worker".to_owned()),
                state: TaskState::Idle,
                state_ms: 12_345,
                polls: 3,
                wakes: 2,
                parent: Some(1),
                spawned_at: at(90),
                root: Some(Cow::Borrowed("benches::dump_population::chain::l9")),
                frames: frames.clone(),
                hidden_frames: 0,
                stack_unavailable: false,
                waits: Vec::new(),
            })
            .collect();
        let d = TaskDump {
            version: 2,
            tasks,
            torn_copies: 0,
            untracked_roots: 0,
        };
        let json = d.to_json();
        assert!(
            json.len() <= d.json_len(),
            "{} > {}",
            json.len(),
            d.json_len()
        );
        assert!(
            d.json_len() <= json.len() + json.len() / 10,
            "{} for {}",
            d.json_len(),
            json.len()
        );
    }

    #[test]
    fn every_control_character_is_escaped_as_serde_json_does() {
        let all: String = (0u8..=0x7f).map(char::from).chain(['é', '✓']).collect();
        let mut out = String::new();
        write_str(&mut out, &all);
        assert_eq!(out, serde_json::to_string(&all).unwrap());
    }

    proptest! {
        /// The length `to_json` sizes its `String` for is off by at most
        /// the digits of its numbers and the escapes of its strings.
        #[test]
        fn to_json_sizes_its_string_closely(d in dump()) {
            let json = d.to_json();
            let escapes = json.matches('\\').count();
            let numbers = 8 * d.tasks.len()
                + 5 * d.tasks.iter().map(|t| t.frames.len()).sum::<usize>();
            prop_assert!(json.len() <= d.json_len() + 6 * escapes + 20 * numbers);
            prop_assert!(d.json_len() <= json.len() + 20 * numbers + 128);
        }

        /// The bytes are serde_json's, whether written whole or streamed.
        #[test]
        fn to_json_and_the_stream_write_serde_jsons_bytes(d in dump()) {
            let expected = serde_json::to_string(&d).unwrap();
            prop_assert_eq!(d.to_json(), expected.clone());
            prop_assert_eq!(streamed(&d), expected);
        }
    }
}
