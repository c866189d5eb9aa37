//! The walker in a build without debug info (`scripts/test.sh` runs this
//! file in a release build with the debug info off and stripped too,
//! where `Traced` polls are inlined and nothing has line tables).
//!
//! Async frames come from the static records the macro emits, so their
//! functions and `.await` lines are exact in every build. Where debug info
//! is missing, the walker finds no `Traced::poll` among the native frames,
//! so it places the async frames at the native frame that runs their
//! bodies' code (see the crate's "Stack accuracy"): the synchronous code
//! the leaf calls comes first, then the async frames, in order, then the
//! executor; the innermost async frame has no running location.

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

/// Synchronous code the leaf calls: its own native frame in every build.
#[inline(never)]
fn sync_helper() -> Backtrace {
    let bt = async_stack::backtrace();
    // Keeps the capture from being a tail call, which would remove this
    // frame.
    std::hint::black_box(bt)
}

#[traced_async]
async fn sync_leaf() -> Backtrace {
    yield_once().await;
    sync_helper()
}

#[traced_async]
async fn sync_middle() -> Backtrace {
    sync_leaf().await
}

#[traced_async]
async fn sync_top() -> Backtrace {
    sync_middle().await
}

#[traced_async]
async fn sync_alone() -> Backtrace {
    yield_once().await;
    sync_helper()
}

/// `sync_alone` for tokio only. A body inlined into the executor's own
/// function is known in the one copy whose `.await` was reached first
/// (see the README's "Stack accuracy"); the two tests run at once, so
/// one fn run under both executors would be placed by whichever got there
/// first (it failed 2 runs in 50 under `block_on`).
#[traced_async]
async fn sync_alone_spawned() -> Backtrace {
    yield_once().await;
    sync_helper()
}

/// An executor: the start of its functions' full names, and a part of its
/// source path (line-tables-only debug info names inlined frames short).
struct Executor(&'static str, &'static str);

const FUTURES: Executor = Executor("futures_executor::", "/futures-executor-");
const TOKIO: Executor = Executor("tokio::", "/tokio-");

/// The default view as a user reads it: the synchronous code inside the
/// leaf, then exactly `asyncs`, then the executor's first frame.
fn assert_order(bt: &Backtrace, asyncs: &[&str], executor: Executor) {
    let frames = bt.frames();
    let name = |i: usize| frames.get(i).and_then(|f| f.function()).unwrap_or("<none>");
    assert_eq!(frames[0].kind(), FrameKind::Native, "{bt}");
    assert_eq!(name(0), "walker_no_debuginfo::sync_helper", "{bt}");
    for (i, expected) in asyncs.iter().enumerate() {
        assert_eq!(frames[1 + i].kind(), FrameKind::Async, "{bt}");
        assert_eq!(name(1 + i), *expected, "{bt}");
    }
    let below = 1 + asyncs.len();
    assert_eq!(frames[below].kind(), FrameKind::Native, "{bt}");
    let Executor(path, dir) = executor;
    assert!(
        name(below).starts_with(path) || frames[below].file().is_some_and(|f| f.contains(dir)),
        "{path}…:\n{bt}"
    );
    assert_eq!(
        frames
            .iter()
            .filter(|f| f.kind() == FrameKind::Async)
            .count(),
        asyncs.len(),
        "{bt}"
    );
}

const CHAIN: [&str; 3] = [
    "walker_no_debuginfo::sync_leaf",
    "walker_no_debuginfo::sync_middle",
    "walker_no_debuginfo::sync_top",
];

#[test]
fn sync_code_the_leaf_calls_comes_first_and_the_executor_last() {
    let bt = futures::executor::block_on(sync_top());
    assert_order(&bt, &CHAIN, FUTURES);
    let bt = futures::executor::block_on(sync_alone());
    assert_order(&bt, &["walker_no_debuginfo::sync_alone"], FUTURES);
}

/// Under tokio the bodies run from another copy of their code than under
/// `block_on` (in a build without debug info, each executor inlines them
/// differently): the walker must place them there too.
#[test]
fn the_order_holds_under_tokio_too() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for _ in 0..2 {
        let bt = rt.block_on(async { tokio::spawn(sync_top()).await.unwrap() });
        assert_order(&bt, &CHAIN, TOKIO);
        let bt = rt.block_on(async { tokio::spawn(sync_alone_spawned()).await.unwrap() });
        assert_order(&bt, &["walker_no_debuginfo::sync_alone_spawned"], TOKIO);
        // And under `block_on` afterwards.
        let bt = futures::executor::block_on(sync_top());
        assert_order(&bt, &CHAIN, FUTURES);
    }
}
