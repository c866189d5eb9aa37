//! The bounds of a dump read from a file, and their checks.
//!
//! A dump file is input: it may be truncated, edited by hand, or hostile.
//! [`TaskDump::from_json`] accepts only dumps this crate could have written,
//! as far as rendering depends on it, so that rendering an accepted dump
//! costs time and memory linear in the file's size. Each limit is an
//! associated constant of [`TaskDump`], and `docs/task-dump.schema.json`
//! states the same ones (a test checks that they agree):
//!
//! | field | limit |
//! |---|---|
//! | `version` | a known format version: 1 to [`DUMP_FORMAT_VERSION`] |
//! | `tasks` | at most [`TaskDump::MAX_TASKS`] |
//! | `branches` of a task | at most [`TaskDump::MAX_TASKS`]; from version 3, the task's `id` first |
//! | `frames` of a task | at most [`TaskDump::MAX_FRAMES`] ([`STACK_CAPACITY`]) per branch, and no more branches (frames at depth 0) than `branches` has ids |
//! | `depth` of a frame | a tree in pre-order: 0 for the first frame, then at most one more than the frame before (so below [`STACK_CAPACITY`]) |
//! | `state_ms` | at most [`TaskDump::MAX_STATE_MS`] (100 years) |
//! | `hidden_frames` | at most [`TaskDump::MAX_HIDDEN_FRAMES`] |
//! | `waits` of a task | at most one per branch; times at most [`TaskDump::MAX_STATE_MS`]; files at most [`TaskDump::MAX_STRING_CHARS`] characters |
//! | `name`, `root`, `function`, `file` | at most [`TaskDump::MAX_STRING_CHARS`] characters |
//!
//! Other numbers are only ever printed as numbers, whatever their value:
//! ids, poll and wake counts, lines and columns (their Rust types, `u64`
//! and `u32`, bound them).
//!
//! # When each is checked
//!
//! The version and the two list lengths are checked while the input is
//! read, by the derived `Deserialize` impls themselves (so any serde
//! reader gets them): an unknown version stops the read before fields it
//! may have changed, and a list stops growing one element past its limit.
//! The rest is checked on the result, by [`check`], which names the field
//! by its path. Either way memory stays proportional to the input: serde
//! allocates a string as long as its text, and a list element at most a
//! few times the bytes that spell it.

use std::fmt;

use serde::de::{Deserializer, Error as _, SeqAccess, Visitor};

use super::{DUMP_FORMAT_VERSION, DumpFrame, ResourceWait, TaskDump, TaskInfo};
use crate::task::STACK_CAPACITY;

impl TaskDump {
    /// The most tasks a dump read by [`TaskDump::from_json`] may hold:
    /// 2<sup>21</sup>, at least the most tasks the registry tracks at once
    /// ([`crate::task::MAX_TASKS`]).
    pub const MAX_TASKS: usize = 1 << 21;

    /// The most frames a task of a dump read by [`TaskDump::from_json`] may
    /// hold under one root (see [`TaskInfo::branches`]): [`STACK_CAPACITY`],
    /// the most a task's published stack holds.
    pub const MAX_FRAMES: usize = STACK_CAPACITY;

    /// The longest time in one state a dump read by [`TaskDump::from_json`]
    /// may show, in milliseconds: 100 years of 365.25 days. The recorder
    /// keeps times in 40 bits of milliseconds (about 35 years), so a real
    /// dump stays below it.
    pub const MAX_STATE_MS: u64 = 36_525 * 86_400_000;

    /// The most hidden frames a task of a dump read by
    /// [`TaskDump::from_json`] may count: 2<sup>31</sup>. The recorder
    /// counts at most 2<sup>30</sup> − 1 frames without a slot, plus at most
    /// [`STACK_CAPACITY`] below a frame that is gone.
    pub const MAX_HIDDEN_FRAMES: u32 = 1 << 31;

    /// The longest string (a task's name or root, a frame's function, a
    /// location's file) a dump read by [`TaskDump::from_json`] may hold, in
    /// characters (Unicode scalar values, as JSON Schema's `maxLength`
    /// counts them): 65,536. Function names and file paths are far shorter;
    /// a task named with a longer string is written by
    /// [`TaskDump::to_json`] but not read back.
    pub const MAX_STRING_CHARS: usize = 1 << 16;
}

// The reader accepts every dump of a registry at its largest.
const _: () = assert!(TaskDump::MAX_TASKS >= crate::task::MAX_TASKS);

/// A value out of bounds, found by [`check`]: the JSON path of the field,
/// and why.
#[derive(Debug)]
pub(super) struct OutOfBounds {
    pub(super) path: String,
    pub(super) reason: String,
}

/// Checks the bounds of the module docs that reading did not already
/// check: branches, frame depths, times, hidden-frame counts and string
/// lengths. Reports the first field out of bounds, in document order.
/// A dump of a format version before 3 has no branches: each task is
/// then given its own id as its one branch.
pub(super) fn check(dump: &mut TaskDump) -> Result<(), OutOfBounds> {
    let before_branches = dump.version < 3;
    for (i, task) in dump.tasks.iter_mut().enumerate() {
        if before_branches && task.branches.is_empty() {
            task.branches.push(task.id);
        }
        check_task(task).map_err(|(field, reason)| OutOfBounds {
            path: format!("tasks[{i}].{field}"),
            reason,
        })?;
    }
    Ok(())
}

/// The bounds of one task; on error, the path within the task.
fn check_task(t: &TaskInfo) -> Result<(), (String, String)> {
    match t.branches.first() {
        None => {
            return Err((
                "branches".to_owned(),
                "an empty list; a task has at least one branch, its own id".to_owned(),
            ));
        }
        Some(&first) if first != t.id => {
            return Err((
                "branches[0]".to_owned(),
                format!(
                    "{first}, not the task's id {}; the first branch is the task itself",
                    t.id
                ),
            ));
        }
        _ => {}
    }
    if let Some(name) = &t.name {
        check_str(name).map_err(|r| ("name".to_owned(), r))?;
    }
    if t.state_ms > TaskDump::MAX_STATE_MS {
        return Err((
            "state_ms".to_owned(),
            format!(
                "{} is more than TaskDump::MAX_STATE_MS ({}, 100 years)",
                t.state_ms,
                TaskDump::MAX_STATE_MS
            ),
        ));
    }
    if let Some(at) = &t.spawned_at {
        check_str(&at.file).map_err(|r| ("spawned_at.file".to_owned(), r))?;
    }
    if let Some(root) = &t.root {
        check_str(root).map_err(|r| ("root".to_owned(), r))?;
    }
    let mut above: Option<u32> = None;
    let (mut roots, mut in_branch) = (0usize, 0usize);
    for (j, frame) in t.frames.iter().enumerate() {
        check_frame(frame, above).map_err(|(f, r)| (format!("frames[{j}].{f}"), r))?;
        above = Some(frame.depth);
        if frame.depth == 0 {
            roots += 1;
            in_branch = 0;
            if roots > t.branches.len() {
                return Err((
                    format!("frames[{j}].depth"),
                    format!(
                        "root number {roots} of a task with {} branches; each root is a branch",
                        t.branches.len()
                    ),
                ));
            }
        }
        in_branch += 1;
        if in_branch > TaskDump::MAX_FRAMES {
            return Err((
                format!("frames[{j}]"),
                format!(
                    "more than {} frames under one root; the most is TaskDump::MAX_FRAMES",
                    TaskDump::MAX_FRAMES
                ),
            ));
        }
    }
    if t.waits.len() > t.branches.len() {
        return Err((
            "waits".to_owned(),
            format!(
                "{} waits for a task of {} roots; each root waits for one thing at most",
                t.waits.len(),
                t.branches.len()
            ),
        ));
    }
    for (j, w) in t.waits.iter().enumerate() {
        check_wait(w).map_err(|(f, r)| (format!("waits[{j}].{f}"), r))?;
    }
    if t.hidden_frames > TaskDump::MAX_HIDDEN_FRAMES {
        return Err((
            "hidden_frames".to_owned(),
            format!(
                "{} is more than TaskDump::MAX_HIDDEN_FRAMES ({})",
                t.hidden_frames,
                TaskDump::MAX_HIDDEN_FRAMES
            ),
        ));
    }
    Ok(())
}

/// The bounds of one frame, the frame before it at depth `above` (`None`
/// for a task's first frame); on error, the field within the frame.
fn check_frame(f: &DumpFrame, above: Option<u32>) -> Result<(), (&'static str, String)> {
    match above {
        None if f.depth != 0 => {
            return Err((
                "depth",
                format!(
                    "{} for the first frame; a task's first frame is its root, at depth 0",
                    f.depth
                ),
            ));
        }
        Some(above) if u64::from(f.depth) > u64::from(above) + 1 => {
            return Err((
                "depth",
                format!(
                    "{} after a frame at depth {above}; a frame is at most one deeper than the frame before it",
                    f.depth
                ),
            ));
        }
        _ => {}
    }
    check_str(&f.function).map_err(|r| ("function", r))?;
    if let Some(at) = &f.defined_at {
        check_str(&at.file).map_err(|r| ("defined_at.file", r))?;
    }
    if let Some(at) = &f.awaiting_at {
        check_str(&at.file).map_err(|r| ("awaiting_at.file", r))?;
    }
    Ok(())
}

/// The bounds of one wait: its strings and times.
fn check_wait(w: &ResourceWait) -> Result<(), (String, String)> {
    let time = |field: &str, ms: u64| {
        if ms > TaskDump::MAX_STATE_MS {
            Err((
                field.to_owned(),
                format!(
                    "{ms} is more than TaskDump::MAX_STATE_MS ({}, 100 years)",
                    TaskDump::MAX_STATE_MS
                ),
            ))
        } else {
            Ok(())
        }
    };
    check_str(&w.created_at.file).map_err(|r| ("created_at.file".to_owned(), r))?;
    if let Some(at) = &w.waiting_at {
        check_str(&at.file).map_err(|r| ("waiting_at.file".to_owned(), r))?;
    }
    time("waiting_ms", w.waiting_ms)?;
    for (k, h) in w.holders.iter().enumerate() {
        check_str(&h.acquired_at.file)
            .map_err(|r| (format!("holders[{k}].acquired_at.file"), r))?;
        time(&format!("holders[{k}].held_ms"), h.held_ms)?;
    }
    Ok(())
}

/// A string's length bound.
fn check_str(s: &str) -> Result<(), String> {
    // A string has no more characters than bytes: most are decided by
    // their length in bytes alone.
    if s.len() <= TaskDump::MAX_STRING_CHARS {
        return Ok(());
    }
    let chars = s.chars().count();
    if chars <= TaskDump::MAX_STRING_CHARS {
        return Ok(());
    }
    Err(format!(
        "a string of {chars} characters; the most is TaskDump::MAX_STRING_CHARS ({})",
        TaskDump::MAX_STRING_CHARS
    ))
}

/// `TaskDump::version`: a known format version.
pub(super) fn version<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = <u32 as serde::Deserialize>::deserialize(d)?;
    if (1..=DUMP_FORMAT_VERSION).contains(&v) {
        Ok(v)
    } else {
        Err(D::Error::custom(format_args!(
            "unknown format version {v}; this build reads versions 1 to {DUMP_FORMAT_VERSION}"
        )))
    }
}

/// `TaskDump::tasks`: at most [`TaskDump::MAX_TASKS`].
pub(super) fn tasks<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<TaskInfo>, D::Error> {
    d.deserialize_seq(AtMost {
        max: TaskDump::MAX_TASKS,
        what: "tasks",
        limit: "TaskDump::MAX_TASKS",
        of: std::marker::PhantomData,
    })
}

/// `TaskInfo::frames`: at most [`TaskDump::MAX_FRAMES`] for each of at
/// most [`TaskDump::MAX_TASKS`] branches (per branch, [`check`] counts).
pub(super) fn frames<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<DumpFrame>, D::Error> {
    d.deserialize_seq(AtMost {
        max: TaskDump::MAX_FRAMES * TaskDump::MAX_TASKS,
        what: "frames",
        limit: "TaskDump::MAX_FRAMES for each of TaskDump::MAX_TASKS branches",
        of: std::marker::PhantomData,
    })
}

/// `TaskInfo::waits`: at most [`TaskDump::MAX_TASKS`] (one per root;
/// [`check`] compares with the task's branches).
pub(super) fn waits<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ResourceWait>, D::Error> {
    d.deserialize_seq(AtMost {
        max: TaskDump::MAX_TASKS,
        what: "waits",
        limit: "TaskDump::MAX_TASKS",
        of: std::marker::PhantomData,
    })
}

/// `TaskInfo::branches`: at most [`TaskDump::MAX_TASKS`].
pub(super) fn branches<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    d.deserialize_seq(AtMost {
        max: TaskDump::MAX_TASKS,
        what: "branches",
        limit: "TaskDump::MAX_TASKS",
        of: std::marker::PhantomData,
    })
}

/// Reads a list of at most `max` elements: the element after the last one
/// allowed is an error, so the list never grows past `max`.
struct AtMost<T> {
    max: usize,
    /// What the elements are, in the error: `frames`.
    what: &'static str,
    /// The constant that sets `max`, in the error.
    limit: &'static str,
    of: std::marker::PhantomData<fn() -> T>,
}

impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for AtMost<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of at most {} {}", self.max, self.what)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        // Grown as elements arrive, never from the declared size (which a
        // format with length prefixes could inflate).
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            if items.len() == self.max {
                return Err(A::Error::custom(format_args!(
                    "more than {} {}; the most is {}",
                    self.max, self.what, self.limit
                )));
            }
            items.push(item);
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `AtMost` with a small limit, on JSON lists of numbers.
    fn at_most(max: usize, json: &str) -> Result<Vec<u8>, String> {
        let mut de = serde_json::Deserializer::from_str(json);
        de.deserialize_seq(AtMost {
            max,
            what: "bytes",
            limit: "THREE",
            of: std::marker::PhantomData,
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_list_may_reach_its_limit_but_not_pass_it() {
        assert_eq!(at_most(3, "[]"), Ok(vec![]));
        assert_eq!(at_most(3, "[1,2,3]"), Ok(vec![1, 2, 3]));
        assert_eq!(
            at_most(3, "[1,2,3,4,5]"),
            Err("more than 3 bytes; the most is THREE at line 1 column 9".to_owned())
        );
        assert_eq!(
            at_most(3, "{}"),
            Err(
                "invalid type: map, expected a list of at most 3 bytes at line 1 column 0"
                    .to_owned()
            )
        );
    }

    #[test]
    fn the_state_limit_is_one_hundred_years() {
        let century = std::time::Duration::from_secs(100 * 365 * 86_400 + 25 * 86_400);
        assert_eq!(u128::from(TaskDump::MAX_STATE_MS), century.as_millis());
        assert_eq!(TaskDump::MAX_STATE_MS, 3_155_760_000_000);
    }

    #[test]
    fn strings_are_measured_in_characters() {
        let at_limit = "é".repeat(TaskDump::MAX_STRING_CHARS);
        assert_eq!(check_str(&at_limit), Ok(()));
        assert_eq!(
            check_str(&format!("{at_limit}x")),
            Err(
                "a string of 65537 characters; the most is TaskDump::MAX_STRING_CHARS (65536)"
                    .to_owned()
            )
        );
    }
}
