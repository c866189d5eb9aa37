//! The walker inside the branches of `join!` and `select!` (futures and
//! tokio). Each branch is a traced function that captures on every poll;
//! every capture must show that branch running, then the parent suspended at
//! the line of the `join!`/`select!`, then the root suspended at its
//! `.await`. A branch polled after its sibling suspended must not show the
//! sibling.

mod common;

use std::pin::pin;
use std::sync::Mutex;

use async_stack::{Backtrace, traced_async};
use futures::FutureExt;

use common::{assert_stack, awaiting, running, yield_once};

/// Captures made by the branches: `(branch, capture line, backtrace)`.
type Sink = Mutex<Vec<(&'static str, u32, Backtrace)>>;

/// How many times a branch suspends before it returns.
#[derive(Clone, Copy)]
enum Finish {
    AfterOneYield,
    Never,
}

#[traced_async]
async fn branch(name: &'static str, sink: &Sink, finish: Finish) -> &'static str {
    let (bt, line) = (async_stack::backtrace(), line!());
    sink.lock().unwrap().push((name, line, bt));
    match finish {
        Finish::AfterOneYield => yield_once().await,
        Finish::Never => std::future::pending().await,
    }
    let (bt, line) = (async_stack::backtrace(), line!());
    sink.lock().unwrap().push((name, line, bt));
    name
}

/// Checks every capture of `sink`: `expected` captures in total, each
/// showing its branch, then `parent` at `parent_line`, then `root` at
/// `root_line`.
#[track_caller]
fn check(
    sink: Sink,
    expected: &[&str],
    parent: &str,
    parent_line: u32,
    root: &str,
    root_line: u32,
) {
    let mut captures = sink.into_inner().unwrap();
    captures.sort_by_key(|&(name, line, _)| (name, line));
    let names: Vec<&str> = captures.iter().map(|&(name, ..)| name).collect();
    assert_eq!(names, expected);
    for (_, line, bt) in &captures {
        let expected = [
            running("walker_join_select::branch", file!(), *line),
            awaiting(parent, file!(), parent_line),
            awaiting(root, file!(), root_line),
        ];
        assert_stack(bt, 0, &expected);
    }
}

#[traced_async]
async fn futures_join(sink: &Sink) -> u32 {
    let (a, b) = (
        branch("a", sink, Finish::AfterOneYield),
        branch("b", sink, Finish::AfterOneYield),
    );
    let (out, line) = (futures::join!(a, b), line!());
    assert_eq!(out, ("a", "b"));
    line
}

#[traced_async]
async fn root_futures_join(sink: &Sink) -> (u32, u32) {
    let (join_line, line) = (futures_join(sink).await, line!());
    (join_line, line)
}

#[test]
fn futures_join_branches() {
    let sink = Sink::default();
    let (join_line, root_line) = futures::executor::block_on(root_futures_join(&sink));
    check(
        sink,
        &["a", "a", "b", "b"],
        "walker_join_select::futures_join",
        join_line,
        "walker_join_select::root_futures_join",
        root_line,
    );
}

#[traced_async]
async fn tokio_join(sink: &Sink) -> u32 {
    let (a, b) = (
        branch("a", sink, Finish::AfterOneYield),
        branch("b", sink, Finish::AfterOneYield),
    );
    let (out, line) = (tokio::join!(a, b), line!());
    assert_eq!(out, ("a", "b"));
    line
}

#[traced_async]
async fn root_tokio_join(sink: &Sink) -> (u32, u32) {
    let (join_line, line) = (tokio_join(sink).await, line!());
    (join_line, line)
}

#[test]
fn tokio_join_branches() {
    let sink = Sink::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (join_line, root_line) = rt.block_on(root_tokio_join(&sink));
    check(
        sink,
        &["a", "a", "b", "b"],
        "walker_join_select::tokio_join",
        join_line,
        "walker_join_select::root_tokio_join",
        root_line,
    );
}

#[traced_async]
async fn futures_select(sink: &Sink) -> u32 {
    let mut a = pin!(branch("a", sink, Finish::AfterOneYield).fuse());
    let mut b = pin!(branch("b", sink, Finish::Never).fuse());
    let (won, line) = (futures::select! { x = a => x, y = b => y }, line!());
    assert_eq!(won, "a");
    line
}

#[traced_async]
async fn root_futures_select(sink: &Sink) -> (u32, u32) {
    let (select_line, line) = (futures_select(sink).await, line!());
    (select_line, line)
}

#[test]
fn futures_select_branches() {
    let sink = Sink::default();
    let (select_line, root_line) = futures::executor::block_on(root_futures_select(&sink));
    // `b` never finishes: one capture from it, two from the winner `a`.
    check(
        sink,
        &["a", "a", "b"],
        "walker_join_select::futures_select",
        select_line,
        "walker_join_select::root_futures_select",
        root_line,
    );
}

#[traced_async]
async fn tokio_select(sink: &Sink) -> u32 {
    let (a, b) = (
        branch("a", sink, Finish::AfterOneYield),
        branch("b", sink, Finish::Never),
    );
    // Unbiased: tokio picks a random branch to poll first.
    let (won, line) = (tokio::select! { x = a => x, y = b => y }, line!());
    assert_eq!(won, "a");
    line
}

#[traced_async]
async fn root_tokio_select(sink: &Sink) -> (u32, u32) {
    let (select_line, line) = (tokio_select(sink).await, line!());
    (select_line, line)
}

#[test]
fn tokio_select_branches() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    for _ in 0..20 {
        let sink = Sink::default();
        let (select_line, root_line) = rt.block_on(root_tokio_select(&sink));
        check(
            sink,
            &["a", "a", "b"],
            "walker_join_select::tokio_select",
            select_line,
            "walker_join_select::root_tokio_select",
            root_line,
        );
    }
}

#[traced_async]
async fn tokio_select_spawned() -> (Vec<(&'static str, u32, Backtrace)>, u32) {
    let sink = Sink::default();
    let (a, b) = (
        branch("a", &sink, Finish::AfterOneYield),
        branch("b", &sink, Finish::Never),
    );
    let (won, line) = (tokio::select! { biased; x = a => x, y = b => y }, line!());
    assert_eq!(won, "a");
    (sink.into_inner().unwrap(), line)
}

#[test]
fn tokio_select_in_a_spawned_task() {
    // The task root is the selecting function itself.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (captures, select_line) = rt.block_on(rt.spawn(tokio_select_spawned())).unwrap();
    let names: Vec<&str> = captures.iter().map(|&(name, ..)| name).collect();
    // Biased: `a`, then `b`, then `a` again after its yield.
    assert_eq!(names, ["a", "b", "a"]);
    for (_, line, bt) in &captures {
        let expected = [
            running("walker_join_select::branch", file!(), *line),
            awaiting(
                "walker_join_select::tokio_select_spawned",
                file!(),
                select_line,
            ),
        ];
        assert_stack(bt, 0, &expected);
    }
}
