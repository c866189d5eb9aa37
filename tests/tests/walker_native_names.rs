//! Native frames read the same in a debug build and in a release build
//! with line tables only (`scripts/test.sh` runs this file in both): a
//! function of its own is named by its full path, which line-tables-only
//! debug info leaves out (it names these helpers `sync_helper` and
//! `generic_helper<u8>`), from the symbol table.

use async_stack::{Backtrace, FrameKind, traced_async};

/// Inlined into the helpers below: line-tables-only debug info describes
/// a function (by its short name) only when something was inlined into
/// it, and the symbol table names those that have no description.
#[inline(always)]
fn inlined_step(line: u32) -> u32 {
    std::hint::black_box(line)
}

/// A plain function called from a traced one. Returns a tuple, so the
/// call to `backtrace()` is not in tail position.
#[inline(never)]
fn sync_helper() -> (Backtrace, u32) {
    (async_stack::backtrace(), inlined_step(line!()))
}

/// The same, generic: line-tables-only debug info names it with its
/// generic arguments and no path (`generic_helper<u8>`).
#[inline(never)]
fn generic_helper<T: Default>() -> (Backtrace, T) {
    inlined_step(0);
    (async_stack::backtrace(), T::default())
}

#[traced_async]
async fn leaf() -> (Backtrace, Backtrace) {
    let ((plain, _), (generic, _)) = (sync_helper(), generic_helper::<u8>());
    (plain, generic)
}

/// The first frame of `bt`: native, named `name`, and directly above the
/// traced `leaf`.
fn assert_first_native(bt: &Backtrace, name: &str) {
    let frames = bt.frames();
    assert_eq!(frames[0].kind(), FrameKind::Native, "{bt}");
    assert_eq!(frames[0].function(), Some(name), "{bt}");
    assert_eq!(frames[1].kind(), FrameKind::Async, "{bt}");
    assert_eq!(
        frames[1].function(),
        Some("walker_native_names::leaf"),
        "{bt}"
    );
}

#[test]
fn native_frames_are_named_by_their_full_path() {
    let (plain, generic) = futures::executor::block_on(leaf());
    assert_first_native(&plain, "walker_native_names::sync_helper");
    assert_first_native(&generic, "walker_native_names::generic_helper");
    // The line comes from the line tables in both builds.
    let (helper, line) = sync_helper();
    let first = &helper.frames()[0];
    assert_eq!(first.function(), Some("walker_native_names::sync_helper"));
    assert_eq!(first.line(), Some(line), "{helper}");
    assert!(
        first
            .file()
            .unwrap_or_default()
            .ends_with("walker_native_names.rs"),
        "{helper}"
    );
}
