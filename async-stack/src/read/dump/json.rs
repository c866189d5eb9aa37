//! The JSON form of a dump (schema: `docs/task-dump.schema.json`), read,
//! and why reading one fails ([`FromJsonError`]). Writing it is
//! `json_write.rs`.
//!
//! Reading goes through `serde_path_to_error`, so that every error, from
//! the parser, a field's type or a bound (see `bounds.rs`), names the field
//! it is about by its JSON path.

use std::fmt;

use super::TaskDump;
use super::bounds::{self, OutOfBounds};

impl TaskDump {
    /// Parses the JSON form, with an error naming the field for malformed
    /// or out-of-bounds input.
    ///
    /// Besides the schema's types, a dump must obey these bounds, so that
    /// rendering one read from a file (with `Display`) takes time and
    /// memory linear in the file's size:
    ///
    /// - `version` is a known format version, 1 to
    ///   [`DUMP_FORMAT_VERSION`](super::DUMP_FORMAT_VERSION);
    /// - at most [`TaskDump::MAX_TASKS`] tasks, and at most
    ///   [`TaskDump::MAX_FRAMES`] frames per root of a task;
    /// - a task's `branches` start with its `id` and name at least as many
    ///   roots as its frames have (a dump of version 1 or 2 has none: each
    ///   task gets its own id);
    /// - a task's frames are a tree in pre-order: the first at depth 0,
    ///   each next one at most one deeper than the frame before it;
    /// - `state_ms` at most [`TaskDump::MAX_STATE_MS`] (100 years);
    /// - `hidden_frames` at most [`TaskDump::MAX_HIDDEN_FRAMES`];
    /// - names, roots, functions and files at most
    ///   [`TaskDump::MAX_STRING_CHARS`] characters.
    ///
    /// The memory it takes is proportional to the input's length: at most
    /// 16 times it, whatever the input (`tests/tests/faults_decoders.rs`).
    ///
    /// ```
    /// use async_stack::TaskDump;
    ///
    /// let json = r#"{"version": 3, "tasks": [{"id": 1, "tokio_id": null,
    ///     "branches": [1], "name": null,
    ///     "state": "idle", "state_ms": 0, "polls": 1, "wakes": 0,
    ///     "parent": null, "spawned_at": null, "root": null,
    ///     "frames": [{"depth": 4294967295, "function": "f",
    ///                 "defined_at": null, "awaiting_at": null,
    ///                 "running": false}],
    ///     "hidden_frames": 0, "stack_unavailable": false}],
    ///     "torn_copies": 0, "untracked_roots": 0}"#;
    /// let err = TaskDump::from_json(json).unwrap_err();
    /// assert_eq!(err.path(), "tasks[0].frames[0].depth");
    /// assert_eq!(
    ///     err.to_string(),
    ///     "tasks[0].frames[0].depth: 4294967295 for the first frame; \
    ///      a task's first frame is its root, at depth 0"
    /// );
    /// ```
    pub fn from_json(json: &str) -> Result<TaskDump, FromJsonError> {
        let mut dump: TaskDump = parse_at_path(json).map_err(|(path, e)| FromJsonError {
            path,
            kind: Kind::Json(e),
        })?;
        bounds::check(&mut dump).map_err(|OutOfBounds { path, reason }| FromJsonError {
            path,
            kind: Kind::OutOfBounds(reason),
        })?;
        Ok(dump)
    }
}

/// Why [`TaskDump::from_json`] rejected its input: which field, by its
/// JSON path (`tasks[3].frames[2].depth`), and why.
///
/// `Display` writes both: the path, a colon, then the reason, which for an
/// error the JSON parser found ends with its line and column.
///
/// ```
/// use async_stack::TaskDump;
///
/// let err = TaskDump::from_json(r#"{"version": 2, "tasks": [}"#).unwrap_err();
/// assert_eq!(err.path(), "tasks[0]");
/// assert_eq!(err.line_column(), Some((1, 26)));
/// assert_eq!(err.to_string(), "tasks[0]: expected value at line 1 column 26");
/// ```
#[derive(Debug)]
pub struct FromJsonError {
    /// `tasks[3].frames[2].depth`; empty for the document as a whole.
    path: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The parser rejected the text, a value had the wrong type, or a
    /// bound checked while reading failed (a version, a list's length).
    Json(serde_json::Error),
    /// A bound checked on the dump read failed.
    OutOfBounds(String),
}

/// Parses the whole of `json` (trailing characters are an error) as a
/// `T`, through `serde_path_to_error`. An error comes with the JSON path of
/// the field it is about (`tasks[3].frames[2].depth`), empty when it is
/// about the document as a whole. Shared by every `from_json` of the crate.
pub(crate) fn parse_at_path<'de, T: serde::Deserialize<'de>>(
    json: &'de str,
) -> Result<T, (String, serde_json::Error)> {
    let mut de = serde_json::Deserializer::from_str(json);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let mut path = e.path().to_string();
        // `serde_path_to_error` writes the document itself as `.`, and a
        // key it could not read as `?`: the error is then about the object
        // that holds it.
        if path == "." {
            path.clear();
        } else if path.ends_with('?') {
            path.pop();
            if path.ends_with('.') {
                path.pop();
            }
        }
        (path, e.into_inner())
    })?;
    de.end().map_err(|e| (String::new(), e))?;
    Ok(value)
}

impl FromJsonError {
    /// The JSON path of the field the error is about, such as
    /// `tasks[3].frames[2].depth` or `version`; empty when it is about the
    /// document as a whole (empty input, trailing characters).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The 1-based line and column where reading stopped, for an error
    /// found while reading the text (bad syntax, a wrong type, an unknown
    /// version, a list too long). `None` for a bound checked after reading
    /// (a depth, a time, a count or a string's length): [`path`](Self::path)
    /// names the field.
    pub fn line_column(&self) -> Option<(usize, usize)> {
        match &self.kind {
            Kind::Json(e) if e.line() != 0 => Some((e.line(), e.column())),
            _ => None,
        }
    }
}

impl fmt::Display for FromJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        match &self.kind {
            Kind::Json(e) => write!(f, "{e}"),
            Kind::OutOfBounds(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for FromJsonError {
    /// The JSON parser's error, when it found the problem.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Json(e) => Some(e),
            Kind::OutOfBounds(_) => None,
        }
    }
}
