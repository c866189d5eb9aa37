//! The walker in a build without debug info (`scripts/test.sh` runs this
//! file in a release build with the debug info off and stripped too,
//! where `Traced` polls are inlined and nothing has line tables).
//!
//! Async frames come from the static records the macro emits, so their
//! functions and `.await` lines are exact in every build. Where debug info
//! is missing, the walker cannot tell where each level sits among the
//! native frames (see the crate's "Stack accuracy"): the async frames then
//! stand together, in order, and the innermost one has no running location.

mod common;

use async_stack::{Backtrace, FrameKind, traced_async};

use common::yield_once;

#[traced_async]
async fn leaf() -> (Backtrace, u32) {
    yield_once().await;
    (async_stack::backtrace(), line!())
}

#[traced_async]
async fn middle() -> (Backtrace, Vec<u32>) {
    let ((bt, running), line) = (leaf().await, line!());
    (bt, vec![running, line])
}

#[traced_async]
async fn top() -> (Backtrace, Vec<u32>) {
    let ((bt, mut lines), line) = (middle().await, line!());
    lines.push(line);
    (bt, lines)
}

/// Whether this test's own code has line tables: whether the native frame
/// of the test function, found in the full view, has a line.
fn has_line_info(bt: &Backtrace) -> bool {
    bt.all_frames().iter().any(|f| {
        f.kind() == FrameKind::Native
            && f.function().is_some_and(|n| {
                n.ends_with("async_frames_are_exact_and_in_order_with_or_without_debug_info")
            })
            && f.line().is_some()
    })
}

#[test]
fn async_frames_are_exact_and_in_order_with_or_without_debug_info() {
    let (bt, lines) = futures::executor::block_on(top());
    let frames = bt.frames();
    let at: Vec<usize> = (0..frames.len())
        .filter(|&i| frames[i].kind() == FrameKind::Async)
        .collect();
    assert_eq!(at.len(), 3, "{bt}");
    assert_eq!(at[2] - at[0], 2, "async frames must stand together:\n{bt}");
    let names: Vec<&str> = at
        .iter()
        .map(|&i| frames[i].function().unwrap_or("<none>"))
        .collect();
    assert_eq!(
        names,
        [
            "walker_no_debuginfo::leaf",
            "walker_no_debuginfo::middle",
            "walker_no_debuginfo::top"
        ],
        "{bt}"
    );
    // The `.await`s the callers are suspended on: from the static records.
    let this_file = common::normalize(file!());
    for (&i, &line) in at[1..].iter().zip(&lines[1..]) {
        let f = &frames[i];
        assert!(!f.is_running(), "{bt}");
        assert_eq!(
            (f.file().map(common::normalize), f.line()),
            (Some(this_file.clone()), Some(line)),
            "{bt}"
        );
    }
    // Where the leaf is running: from line tables only.
    let leaf = &frames[at[0]];
    assert!(leaf.is_running(), "{bt}");
    if has_line_info(&bt) {
        assert_eq!(leaf.line(), Some(lines[0]), "{bt}");
    } else {
        assert_eq!((leaf.file(), leaf.line()), (None, None), "{bt}");
    }
}
