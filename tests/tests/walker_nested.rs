//! The walker on a known program whose traced functions are nested across
//! modules and files: `serve` (this file) -> `front::handle` ->
//! `router::route` -> `router::table::dispatch` -> `store::fetch`, the last
//! four in `fixture_walker/`. The leaf captures after a suspension, and the
//! test checks the exact async frames (function, file, the `.await` line of
//! each suspended frame, the running line of the leaf), and where native
//! frames are spliced in, under four executors.

mod common;
#[path = "fixture_walker/front.rs"]
mod front;
#[path = "fixture_walker/router.rs"]
mod router;
#[path = "fixture_walker/store.rs"]
mod store;

use async_stack::{FrameKind, traced_async};

use common::{Seen, assert_stack, awaiting, running};
use store::Trail;

#[traced_async]
async fn serve(key: u32) -> Trail {
    let (mut trail, line) = (front::handle(key).await, line!());
    trail.awaits.push(line);
    trail
}

/// The suspended frames above the leaf, innermost first.
fn suspended(trail: &Trail) -> Vec<Seen> {
    let [dispatch, route, handle, serve] = trail.awaits[..] else {
        panic!("four callers expected, got {:?}", trail.awaits);
    };
    vec![
        awaiting(
            "walker_nested::router::table::dispatch",
            router::FILE,
            dispatch,
        ),
        awaiting("walker_nested::router::route", router::FILE, route),
        awaiting("walker_nested::front::handle", front::FILE, handle),
        awaiting("walker_nested::serve", file!(), serve),
    ]
}

/// Checks both captures of the leaf.
fn check(trail: &Trail) {
    // Captured in the leaf itself: no native frame inside the leaf's poll.
    let mut expected = vec![running(
        "walker_nested::store::fetch",
        store::FILE,
        trail.direct_line,
    )];
    expected.extend(suspended(trail));
    assert_stack(&trail.direct, 0, &expected);

    // Captured in a synchronous helper: the helper is the first frame, and
    // the leaf runs at the line that calls it.
    let mut expected = vec![running(
        "walker_nested::store::fetch",
        store::FILE,
        trail.call_line,
    )];
    expected.extend(suspended(trail));
    let bt = &trail.via_helper;
    if cfg!(debug_assertions) {
        let first = &bt.frames()[0];
        assert_eq!(first.kind(), FrameKind::Native, "{bt}");
        assert_eq!(
            first.function(),
            Some("walker_nested::store::capture_here"),
            "{bt}"
        );
        assert_eq!(
            common::normalize(first.file().unwrap_or_default()),
            common::normalize(store::FILE),
            "{bt}"
        );
        assert_eq!(first.line(), Some(trail.helper_line), "{bt}");
        assert_stack(bt, 1, &expected);
    } else {
        // Release builds may turn the call into a tail call and lose the
        // helper's frame; the async frames do not depend on it.
        assert_eq!(common::async_frames(bt), expected, "{bt}");
        assert_eq!(bt.async_depth(), expected.len(), "{bt}");
    }
}

#[test]
fn tokio_multi_thread_spawned_task() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let trail = rt.block_on(rt.spawn(serve(7))).unwrap();
    check(&trail);
}

#[test]
fn tokio_multi_thread_block_on() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    check(&rt.block_on(serve(7)));
}

#[test]
fn tokio_current_thread_spawned_task() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let trail = rt.block_on(rt.spawn(serve(7))).unwrap();
    check(&trail);
}

#[test]
fn tokio_current_thread_block_on() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    check(&rt.block_on(serve(7)));
}

#[test]
fn futures_block_on() {
    check(&futures::executor::block_on(serve(7)));
}

#[test]
fn park_executor() {
    let (trail, poll_line) = common::block_on(serve(7));
    check(&trail);
    // The executor's frame comes right below the root, at its `poll` call.
    let frames = trail.direct.frames();
    let executor = &frames[trail.direct.async_depth()];
    assert_eq!(executor.kind(), FrameKind::Native);
    assert_eq!(
        (
            common::normalize(executor.file().unwrap_or_default()),
            executor.line()
        ),
        (common::normalize(common::FILE), Some(poll_line)),
        "{}",
        trail.direct
    );
}

#[test]
fn repeated_captures_are_identical() {
    // Return addresses and symbols are cached after the first capture; the
    // second run must read exactly the same.
    let first = futures::executor::block_on(serve(7));
    let second = futures::executor::block_on(serve(7));
    check(&second);
    assert_eq!(
        common::async_frames(&first.direct),
        common::async_frames(&second.direct)
    );
}
