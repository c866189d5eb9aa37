//! [`WorkloadError`]: why a workload could not be read, written or run.
//!
//! Every error about the content of a workload names the field by its JSON
//! path (`groups[0].consumers[1].instances`), whether the JSON parser found
//! it (bad syntax, a wrong type, an unknown or missing field) or a bound
//! did (see `validate.rs`). Errors about the file itself (it cannot be
//! opened, is too large, is not UTF-8) name the file instead.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::Utf8Error;

/// Why a workload was rejected, or could not be read or written.
///
/// `Display` writes the JSON path of the offending field, a colon, and the
/// reason (for an error found by the JSON parser, the reason ends with its
/// line and column); for a problem with the file itself, the file's name
/// and the reason.
///
/// ```
/// use async_stack::workload::Workload;
///
/// let err = Workload::from_json(r#"{"version": 1, "duration_ms": "long"}"#).unwrap_err();
/// assert_eq!(err.path(), "duration_ms");
/// assert_eq!(err.line_column(), Some((1, 36)));
/// assert_eq!(
///     err.to_string(),
///     "duration_ms: invalid type: string \"long\", expected u64 at line 1 column 36"
/// );
/// ```
#[derive(Debug)]
pub struct WorkloadError {
    /// `groups[0].producer.fan_out`; empty for the document as a whole
    /// and for file errors.
    path: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The parser rejected the text, or a value had the wrong type.
    Json(serde_json::Error),
    /// A bound failed (see `validate.rs`).
    Invalid(String),
    /// Opening, reading or writing the file failed.
    Io {
        what: &'static str,
        file: PathBuf,
        error: io::Error,
    },
    /// The file is larger than `Workload::MAX_FILE_BYTES`.
    TooLarge { file: PathBuf, len: u64 },
    /// The file is not UTF-8.
    NotUtf8 { file: PathBuf, error: Utf8Error },
}

impl WorkloadError {
    pub(super) fn json(path: String, e: serde_json::Error) -> Self {
        WorkloadError {
            path,
            kind: Kind::Json(e),
        }
    }

    pub(super) fn invalid(path: String, reason: String) -> Self {
        WorkloadError {
            path,
            kind: Kind::Invalid(reason),
        }
    }

    pub(super) fn io(what: &'static str, file: &Path, error: io::Error) -> Self {
        WorkloadError {
            path: String::new(),
            kind: Kind::Io {
                what,
                file: file.to_path_buf(),
                error,
            },
        }
    }

    pub(super) fn too_large(file: &Path, len: u64) -> Self {
        WorkloadError {
            path: String::new(),
            kind: Kind::TooLarge {
                file: file.to_path_buf(),
                len,
            },
        }
    }

    pub(super) fn not_utf8(file: &Path, error: Utf8Error) -> Self {
        WorkloadError {
            path: String::new(),
            kind: Kind::NotUtf8 {
                file: file.to_path_buf(),
                error,
            },
        }
    }

    /// The JSON path of the field the error is about, such as
    /// `groups[0].consumers[1].instances` or `version`; empty when it is
    /// about the document as a whole (empty input, trailing characters) or
    /// about the file rather than its content.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The 1-based line and column where the JSON parser stopped, for an
    /// error it found (bad syntax, a wrong type, an unknown or missing
    /// field). `None` for a bound, checked after parsing
    /// ([`path`](Self::path) names the field), and for file errors.
    pub fn line_column(&self) -> Option<(usize, usize)> {
        match &self.kind {
            Kind::Json(e) if e.line() != 0 => Some((e.line(), e.column())),
            _ => None,
        }
    }
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        match &self.kind {
            Kind::Json(e) => write!(f, "{e}"),
            Kind::Invalid(reason) => f.write_str(reason),
            Kind::Io { what, file, error } => write!(f, "{what} {}: {error}", file.display()),
            Kind::TooLarge { file, len } => write!(
                f,
                "{}: {len} bytes, more than the {} a workload file may have",
                file.display(),
                super::Workload::MAX_FILE_BYTES
            ),
            Kind::NotUtf8 { file, error } => write!(
                f,
                "{}: not UTF-8 (invalid byte at offset {})",
                file.display(),
                error.valid_up_to()
            ),
        }
    }
}

impl std::error::Error for WorkloadError {
    /// The JSON parser's, the file system's or the UTF-8 decoder's error,
    /// when one of them found the problem.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Json(e) => Some(e),
            Kind::Io { error, .. } => Some(error),
            Kind::NotUtf8 { error, .. } => Some(error),
            Kind::Invalid(_) | Kind::TooLarge { .. } => None,
        }
    }
}
