//! The frame-recording contract (`DESIGN.md`, "Frame recording: the
//! contract"): a frame's parent is set on every poll from the thread's
//! active frame, so a capture always shows the chain of whoever is polling
//! it now, whatever happened to the future before (moved before its first
//! poll, polled by several parents or tasks, nested executors, dropped on
//! another thread).

mod common;

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use async_stack::{Backtrace, current_task_id, traced_async};
use futures::FutureExt;
use futures::StreamExt;
use futures::stream::FuturesUnordered;

use common::{PollOnce, Seen, assert_no_async_frames, assert_stack, awaiting, running, yield_once};

/// Captures made by leaves: `(leaf tag, capture line, backtrace)`.
type Sink = Mutex<Vec<(u32, u32, Backtrace)>>;

fn take(sink: &Sink) -> Vec<(u32, u32, Backtrace)> {
    std::mem::take(&mut sink.lock().unwrap())
}

/// Captures on each of its two polls.
#[traced_async]
async fn child(tag: u32, sink: &Sink) -> u32 {
    let (bt, line) = (async_stack::backtrace(), line!());
    sink.lock().unwrap().push((tag, line, bt));
    yield_once().await;
    let (bt, line) = (async_stack::backtrace(), line!());
    sink.lock().unwrap().push((tag, line, bt));
    tag
}

fn poll_once<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

// --- FuturesUnordered ---------------------------------------------------

#[traced_async]
async fn fan_out(sink: &Sink) -> u32 {
    let mut set: FuturesUnordered<_> = (0..3).map(|tag| child(tag, sink)).collect();
    let mut done = Vec::new();
    loop {
        let (next, line) = (set.next().await, line!());
        match next {
            Some(tag) => done.push(tag),
            None => {
                done.sort_unstable();
                assert_eq!(done, [0, 1, 2]);
                return line;
            }
        }
    }
}

#[traced_async]
async fn fan_out_root(sink: &Sink) -> (u32, u32) {
    let (fan_line, line) = (fan_out(sink).await, line!());
    (fan_line, line)
}

#[test]
fn futures_unordered_children_link_to_the_polling_parent() {
    let sink = Sink::default();
    let ((fan_line, root_line), _) = common::block_on(fan_out_root(&sink));
    let captures = take(&sink);
    assert_eq!(captures.len(), 6, "two captures per child");
    for (_, line, bt) in &captures {
        let expected = [
            running("frame_contract::child", file!(), *line),
            awaiting("frame_contract::fan_out", file!(), fan_line),
            awaiting("frame_contract::fan_out_root", file!(), root_line),
        ];
        assert_stack(bt, 0, &expected);
    }
}

// --- Shared, polled from two tasks --------------------------------------

#[traced_async]
async fn shared_leaf(sink: &Sink) {
    for round in 0..3 {
        let (bt, line) = (async_stack::backtrace(), line!());
        sink.lock().unwrap().push((round, line, bt));
        if round < 2 {
            yield_once().await;
        }
    }
}

#[traced_async]
async fn task_a<F: Future<Output = ()>>(shared: F) -> u32 {
    let ((), line) = (shared.await, line!());
    line
}

#[traced_async]
async fn task_b<F: Future<Output = ()>>(shared: F) -> u32 {
    let ((), line) = (shared.await, line!());
    line
}

#[test]
fn shared_future_shows_the_chain_of_the_task_polling_it() {
    let sink = Sink::default();
    let shared = shared_leaf(&sink).shared();
    let mut a = pin!(task_a(shared.clone()));
    let mut b = pin!(task_b(shared));

    // Round 0 polled by task A here, round 1 by task B on another thread,
    // round 2 by task A again.
    assert!(poll_once(a.as_mut()).is_pending());
    std::thread::scope(|s| {
        s.spawn(|| assert!(poll_once(b.as_mut()).is_pending()));
    });
    let Poll::Ready(a_line) = poll_once(a.as_mut()) else {
        panic!("task A should finish with the shared future");
    };
    let Poll::Ready(b_line) = poll_once(b.as_mut()) else {
        panic!("task B should see the shared output");
    };

    let captures = take(&sink);
    let rounds: Vec<u32> = captures.iter().map(|&(round, ..)| round).collect();
    assert_eq!(rounds, [0, 1, 2]);
    let pollers = [
        ("frame_contract::task_a", a_line),
        ("frame_contract::task_b", b_line),
        ("frame_contract::task_a", a_line),
    ];
    for ((_, line, bt), (task, task_line)) in captures.iter().zip(pollers) {
        let expected = [
            running("frame_contract::shared_leaf", file!(), *line),
            awaiting(task, file!(), task_line),
        ];
        assert_stack(bt, 0, &expected);
    }
}

// --- block_on inside a poll ---------------------------------------------

#[traced_async]
async fn inner_leaf() -> (Backtrace, u32) {
    yield_once().await;
    (async_stack::backtrace(), line!())
}

#[traced_async]
async fn inner_root() -> (Backtrace, u32, u32) {
    let ((bt, leaf_line), line) = (inner_leaf().await, line!());
    (bt, leaf_line, line)
}

/// Runs a nested executor from inside its poll, before any `.await`.
#[traced_async]
async fn blocking_mid() -> ((Backtrace, u32, u32), u32) {
    let (inner, line) = (futures::executor::block_on(inner_root()), line!());
    (inner, line)
}

#[traced_async]
async fn blocking_root() -> (((Backtrace, u32, u32), u32), u32) {
    let (out, line) = (blocking_mid().await, line!());
    (out, line)
}

/// Asserts the frames of a capture made by `inner_leaf` under
/// `blocking_root -> <mid> -> block_on(inner_root())`, except the frame of
/// `<mid>`, which is returned for the caller to check.
#[track_caller]
fn check_nested(bt: &Backtrace, leaf_line: u32, inner_line: u32, root: Seen) -> Seen {
    let mut frames = common::async_frames(bt);
    assert_eq!(frames.len(), 4, "{bt}");
    assert_eq!(bt.async_depth(), 4, "{bt}");
    let mid = frames.remove(2);
    assert_eq!(
        frames,
        [
            running("frame_contract::inner_leaf", file!(), leaf_line),
            awaiting("frame_contract::inner_root", file!(), inner_line),
            root,
        ],
        "{bt}"
    );
    mid
}

#[test]
fn block_on_inside_a_poll_links_the_inner_chain_to_the_outer_one() {
    let ((((bt, leaf_line, inner_line), block_line), root_line), _) =
        common::block_on(blocking_root());
    let root = awaiting("frame_contract::blocking_root", file!(), root_line);
    let mid = check_nested(&bt, leaf_line, inner_line, root);
    // `blocking_mid` is not suspended on an `.await`: it is executing the
    // `block_on` call. (Whether such a frame counts as running is not
    // specified, so `is_running` is not compared.)
    assert_eq!(
        (mid.function.as_str(), mid.file, mid.line),
        (
            "frame_contract::blocking_mid",
            common::normalize(file!()),
            block_line
        ),
        "{bt}"
    );
}

/// Like `blocking_mid`, after an `.await` that has completed.
#[traced_async]
async fn blocking_mid_after_await() -> ((Backtrace, u32, u32), u32) {
    yield_once().await;
    let (inner, line) = (futures::executor::block_on(inner_root()), line!());
    (inner, line)
}

#[traced_async]
async fn blocking_root_after_await() -> (((Backtrace, u32, u32), u32), u32) {
    let (out, line) = (blocking_mid_after_await().await, line!());
    (out, line)
}

#[test]
fn frame_between_awaits_shows_where_it_runs_not_its_last_await() {
    let ((((bt, leaf_line, inner_line), block_line), root_line), _) =
        common::block_on(blocking_root_after_await());
    let root = awaiting(
        "frame_contract::blocking_root_after_await",
        file!(),
        root_line,
    );
    let mid = check_nested(&bt, leaf_line, inner_line, root);
    // Its `yield_once().await` completed before `block_on` was called; the
    // frame is at the `block_on` line, not at that `.await`.
    assert_eq!(
        (mid.function.as_str(), mid.file, mid.line),
        (
            "frame_contract::blocking_mid_after_await",
            common::normalize(file!()),
            block_line
        ),
        "{bt}"
    );
}

// --- Moved before the first poll ----------------------------------------

/// Creates children inside its own poll and returns them unpolled; they
/// are awaited by another function.
#[traced_async]
async fn make_children(sink: &Sink) -> Vec<impl Future<Output = u32> + '_> {
    let mut children = Vec::with_capacity(1);
    for tag in 0..4 {
        // Growing the vector moves the children created so far.
        children.push(child(tag, sink));
    }
    children.reverse();
    children
}

#[traced_async]
async fn await_moved(sink: &Sink) -> (u32, u32) {
    let (mut children, _) = (make_children(sink).await, line!());
    let boxed = Box::pin(children.remove(0));
    let (tag, boxed_line) = (boxed.await, line!());
    assert_eq!(tag, 3);
    let mut loop_line = 0;
    for c in children {
        let (_, line) = (c.await, line!());
        loop_line = line;
    }
    (boxed_line, loop_line)
}

#[traced_async]
async fn moved_root(sink: &Sink) -> ((u32, u32), u32) {
    let (lines, root_line) = (await_moved(sink).await, line!());
    (lines, root_line)
}

#[test]
fn future_moved_before_its_first_poll() {
    let sink = Sink::default();
    let (((boxed_line, loop_line), root_line), _) = common::block_on(moved_root(&sink));
    let captures = take(&sink);
    let tags: Vec<u32> = captures.iter().map(|&(tag, ..)| tag).collect();
    assert_eq!(tags, [3, 3, 2, 2, 1, 1, 0, 0]);
    for (tag, line, bt) in &captures {
        let parent_line = if *tag == 3 { boxed_line } else { loop_line };
        let expected = [
            running("frame_contract::child", file!(), *line),
            awaiting("frame_contract::await_moved", file!(), parent_line),
            awaiting("frame_contract::moved_root", file!(), root_line),
        ];
        assert_stack(bt, 0, &expected);
    }
}

// --- Dropped or resumed on another thread -------------------------------

#[traced_async]
async fn suspended_task(sink: &Sink, id: &AtomicU64) -> u32 {
    id.store(current_task_id().unwrap(), Ordering::Relaxed);
    let (tag, line) = (child(9, sink).await, line!());
    assert_eq!(tag, 9);
    line
}

/// A capture on a thread that has just dropped (or finished) a task: the
/// probe's own two frames and nothing else.
#[traced_async]
async fn probe_leaf() -> (Backtrace, u32) {
    yield_once().await;
    (async_stack::backtrace(), line!())
}

#[traced_async]
async fn probe() -> ((Backtrace, u32), u32) {
    let (out, line) = (probe_leaf().await, line!());
    (out, line)
}

#[track_caller]
fn check_probe_on_this_thread() {
    assert_eq!(current_task_id(), None);
    assert_no_async_frames(&async_stack::backtrace());
    let (((bt, leaf_line), line), _) = common::block_on(probe());
    let expected = [
        running("frame_contract::probe_leaf", file!(), leaf_line),
        awaiting("frame_contract::probe", file!(), line),
    ];
    assert_stack(&bt, 0, &expected);
    assert_eq!(current_task_id(), None);
}

#[test]
fn task_suspended_here_and_dropped_on_another_thread() {
    let sink = Sink::default();
    let id = AtomicU64::new(0);
    let mut task = Box::pin(suspended_task(&sink, &id));
    assert!(poll_once(task.as_mut()).is_pending());
    let id = id.load(Ordering::Relaxed);
    assert!(async_stack::dump().task(id).is_some());
    std::thread::scope(|s| {
        s.spawn(move || {
            drop(task);
            check_probe_on_this_thread();
        })
        .join()
        .unwrap();
    });
    assert!(async_stack::dump().task(id).is_none());
    check_probe_on_this_thread();
    assert_eq!(take(&sink).len(), 1);
}

#[test]
fn task_suspended_here_and_resumed_on_another_thread() {
    let sink = Sink::default();
    let id = AtomicU64::new(0);
    let mut task = Box::pin(suspended_task(&sink, &id));
    assert!(poll_once(task.as_mut()).is_pending());
    let task_line = std::thread::scope(|s| {
        s.spawn(move || {
            let Poll::Ready(line) = poll_once(task.as_mut()) else {
                panic!("the task finishes on its second poll");
            };
            check_probe_on_this_thread();
            line
        })
        .join()
        .unwrap()
    });
    check_probe_on_this_thread();
    let captures = take(&sink);
    assert_eq!(captures.len(), 2, "one capture on each thread");
    for (_, line, bt) in &captures {
        let expected = [
            running("frame_contract::child", file!(), *line),
            awaiting("frame_contract::suspended_task", file!(), task_line),
        ];
        assert_stack(bt, 0, &expected);
    }
}

// --- One future, two parents --------------------------------------------

/// Polls `c` once, without awaiting it to the end.
#[traced_async]
async fn first_parent<F: Future<Output = u32>>(c: Pin<&mut F>) -> u32 {
    let (poll, line) = (PollOnce(c).await, line!());
    assert!(poll.is_pending());
    line
}

/// Awaits `c` to the end.
#[traced_async]
async fn second_parent<F: Future<Output = u32>>(c: Pin<&mut F>) -> u32 {
    let (tag, line) = (c.await, line!());
    assert_eq!(tag, 5);
    line
}

#[traced_async]
async fn two_parents_root(sink: &Sink) -> [u32; 4] {
    let mut c = pin!(child(5, sink));
    let (first, first_root) = (first_parent(c.as_mut()).await, line!());
    let (second, second_root) = (second_parent(c.as_mut()).await, line!());
    [first, first_root, second, second_root]
}

#[test]
fn future_polled_by_two_parents_is_relinked_on_every_poll() {
    let sink = Sink::default();
    let ([first, first_root, second, second_root], _) = common::block_on(two_parents_root(&sink));
    let captures = take(&sink);
    assert_eq!(captures.len(), 2);
    let parents = [
        ("frame_contract::first_parent", first, first_root),
        ("frame_contract::second_parent", second, second_root),
    ];
    for ((_, line, bt), (parent, parent_line, root_line)) in captures.iter().zip(parents) {
        let expected = [
            running("frame_contract::child", file!(), *line),
            awaiting(parent, file!(), parent_line),
            awaiting("frame_contract::two_parents_root", file!(), root_line),
        ];
        assert_stack(bt, 0, &expected);
    }
}

// --- A task spawned from a task -----------------------------------------

#[traced_async]
async fn spawned_leaf() -> (Backtrace, u32) {
    yield_once().await;
    (async_stack::backtrace(), line!())
}

#[traced_async]
async fn spawned_root() -> ((Backtrace, u32), u32) {
    let (out, line) = (spawned_leaf().await, line!());
    (out, line)
}

#[traced_async]
async fn spawner() -> ((Backtrace, u32), u32) {
    tokio::spawn(spawned_root()).await.unwrap()
}

#[test]
fn spawned_task_is_a_root_of_its_own() {
    // The spawned task is polled by the scheduler, not inside the spawner's
    // poll: its chain ends at its own root.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let ((bt, leaf_line), line) = rt.block_on(rt.spawn(spawner())).unwrap();
    let expected = [
        running("frame_contract::spawned_leaf", file!(), leaf_line),
        awaiting("frame_contract::spawned_root", file!(), line),
    ];
    assert_stack(&bt, 0, &expected);
}
