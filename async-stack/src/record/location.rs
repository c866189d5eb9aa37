//! A **source location** as readers show it: file, line and column, from
//! a call or await site, a `#[track_caller]` location, or a file read
//! back. It sits here, below every reader, so that the task layer's
//! neighbours that report locations (the waits-for graph) and the dumps
//! share one type.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

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

impl SourceLocation {
    /// The location `at` (a `#[track_caller]` caller, a `Location::caller()`).
    pub fn of(at: &'static std::panic::Location<'static>) -> SourceLocation {
        SourceLocation::new_static(at.file(), at.line(), at.column())
    }

    /// A location whose file name is `'static` (a site's, a `Location`'s):
    /// borrowed, not copied.
    #[inline]
    pub(crate) fn new_static(file: &'static str, line: u32, column: u32) -> SourceLocation {
        SourceLocation {
            file: Cow::Borrowed(file),
            line,
            column,
        }
    }
}
