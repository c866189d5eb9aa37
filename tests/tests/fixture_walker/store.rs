//! Fixture, third file: the leaf of the nested program. `fetch` suspends
//! once, then captures twice: directly, and through a synchronous helper.

use async_stack::{Backtrace, traced_async};

use crate::common::yield_once;

pub const FILE: &str = file!();

/// What the leaf captured, and the `.await` lines its callers add on the
/// way out (innermost first).
#[derive(Debug)]
pub struct Trail {
    /// Captured in `fetch` itself, on line `direct_line`.
    pub direct: Backtrace,
    pub direct_line: u32,
    /// Captured in [`capture_here`] on line `helper_line`, called from
    /// `fetch` on line `call_line`.
    pub via_helper: Backtrace,
    pub helper_line: u32,
    pub call_line: u32,
    /// The line of the `.await` each caller is suspended on, innermost
    /// first.
    pub awaits: Vec<u32>,
}

/// Synchronous code inside the leaf's poll. Returns a tuple, so the call
/// to `backtrace()` is not in tail position.
#[inline(never)]
pub fn capture_here() -> (Backtrace, u32) {
    (async_stack::backtrace(), line!())
}

#[traced_async]
pub async fn fetch(key: u32) -> Trail {
    yield_once().await;
    let (direct, direct_line) = (async_stack::backtrace(), line!());
    let ((via_helper, helper_line), call_line) = (capture_here(), line!());
    assert_eq!(key, 7);
    Trail {
        direct,
        direct_line,
        via_helper,
        helper_line,
        call_line,
        awaits: Vec::new(),
    }
}
