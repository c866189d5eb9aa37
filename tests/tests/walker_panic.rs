//! A panic that unwinds through traced frames must leave nothing behind on
//! the thread: the next capture on the same thread shows exactly its own
//! frames (no leftover frames from the panicked chain, `async_depth` equal
//! to the number of frames), `current_task_id()` is `None` outside a poll,
//! the panicked task is gone from dumps, and a dump of the next task shows
//! exactly its own frames.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};

use async_stack::{Backtrace, current_task_id, traced_async};
use futures::FutureExt;

use common::{assert_no_async_frames, assert_stack, awaiting, running, yield_once};

#[traced_async]
async fn boom() {
    yield_once().await;
    panic!("boom");
}

#[traced_async]
async fn mid() {
    yield_once().await;
    boom().await;
}

/// A task root that records its task id, then panics two frames down.
#[traced_async]
async fn doomed(id: &AtomicU64) {
    id.store(
        current_task_id().expect("a task root has an id"),
        Ordering::Relaxed,
    );
    mid().await;
}

/// What `healthy` saw.
#[derive(Debug)]
struct HealthyRun {
    bt: Backtrace,
    leaf_line: u32,
    root_line: u32,
    task_id: u64,
    /// The functions of the task's dumped frames, root first.
    dumped: Vec<(u32, String)>,
}

#[traced_async]
async fn healthy_leaf() -> (Backtrace, u32, u64, Vec<(u32, String)>) {
    yield_once().await;
    let (bt, line) = (async_stack::backtrace(), line!());
    let id = current_task_id().expect("inside a task");
    let dump = async_stack::dump();
    let task = dump.task(id).expect("the running task is in the dump");
    let dumped = task
        .frames
        .iter()
        .map(|f| (f.depth, f.function.to_string()))
        .collect();
    (bt, line, id, dumped)
}

#[traced_async]
async fn healthy() -> HealthyRun {
    let ((bt, leaf_line, task_id, dumped), root_line) = (healthy_leaf().await, line!());
    HealthyRun {
        bt,
        leaf_line,
        root_line,
        task_id,
        dumped,
    }
}

/// Checks a run of `healthy` made after a panic on the same thread.
#[track_caller]
fn check_healthy(seen: &HealthyRun, panicked_task: u64) {
    assert_stack(
        &seen.bt,
        0,
        &[
            running("walker_panic::healthy_leaf", file!(), seen.leaf_line),
            awaiting("walker_panic::healthy", file!(), seen.root_line),
        ],
    );
    assert_ne!(seen.task_id, panicked_task);
    assert_eq!(
        seen.dumped,
        [
            (0, "walker_panic::healthy".to_owned()),
            (1, "walker_panic::healthy_leaf".to_owned())
        ]
    );
}

/// Checks the thread outside any poll, after `panicked_task` panicked.
/// (`current_task_id()` is checked by the `current_task_id_*` tests.)
#[track_caller]
fn check_idle_thread(panicked_task: u64) {
    assert_no_async_frames(&async_stack::backtrace());
    assert!(async_stack::dump().task(panicked_task).is_none());
}

#[test]
fn panic_under_futures_block_on() {
    let id = AtomicU64::new(0);
    let result = catch_unwind(AssertUnwindSafe(|| {
        futures::executor::block_on(doomed(&id))
    }));
    assert_eq!(*result.unwrap_err().downcast::<&str>().unwrap(), "boom");
    let panicked = id.load(Ordering::Relaxed);
    assert_ne!(panicked, 0);
    check_idle_thread(panicked);

    check_healthy(&futures::executor::block_on(healthy()), panicked);
}

#[test]
fn panic_under_park_executor_twice() {
    // Twice on the same thread: a second unwind starts from a clean state.
    for _ in 0..2 {
        let id = AtomicU64::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| common::block_on(doomed(&id))));
        assert!(result.is_err());
        let panicked = id.load(Ordering::Relaxed);
        check_idle_thread(panicked);
        check_healthy(&common::block_on(healthy()).0, panicked);
    }
}

#[test]
fn panic_in_tokio_current_thread_task() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    static ID: AtomicU64 = AtomicU64::new(0);
    let err = rt.block_on(rt.spawn(doomed(&ID))).unwrap_err();
    assert!(err.is_panic());
    let panicked = ID.load(Ordering::Relaxed);
    check_idle_thread(panicked);

    // The next task runs on the same (only) thread.
    let seen = rt.block_on(rt.spawn(healthy())).unwrap();
    check_healthy(&seen, panicked);
    let seen = rt.block_on(healthy());
    check_healthy(&seen, panicked);
}

#[test]
fn panic_in_tokio_single_worker_task() {
    // One worker: the panicked task and the next one run on the same
    // worker thread.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    static ID: AtomicU64 = AtomicU64::new(0);
    let err = rt.block_on(rt.spawn(doomed(&ID))).unwrap_err();
    assert!(err.is_panic());
    let panicked = ID.load(Ordering::Relaxed);
    assert!(async_stack::dump().task(panicked).is_none());
    let seen = rt.block_on(rt.spawn(healthy())).unwrap();
    check_healthy(&seen, panicked);
}

/// What `survivor` saw after catching a panic of its child.
#[derive(Debug)]
struct Survived {
    /// Captured in `survivor` right after the catch.
    after_catch: Backtrace,
    after_catch_line: u32,
    /// Captured in a child awaited after the catch.
    child: Backtrace,
    child_line: u32,
    child_await_line: u32,
    dumped: Vec<(u32, String)>,
}

#[traced_async]
async fn survivor() -> Survived {
    let (caught, _) = (AssertUnwindSafe(mid()).catch_unwind().await, line!());
    assert!(caught.is_err());
    let (after_catch, after_catch_line) = (async_stack::backtrace(), line!());
    let ((child, child_line, _, dumped), child_await_line) = (healthy_leaf().await, line!());
    Survived {
        after_catch,
        after_catch_line,
        child,
        child_line,
        child_await_line,
        dumped,
    }
}

#[traced_async]
async fn survivor_root() -> (Survived, u32) {
    let (survived, line) = (survivor().await, line!());
    (survived, line)
}

#[test]
fn panic_caught_inside_a_traced_parent() {
    let ((s, root_line), _) = common::block_on(survivor_root());
    let root = awaiting("walker_panic::survivor_root", file!(), root_line);
    assert_stack(
        &s.after_catch,
        0,
        &[
            running("walker_panic::survivor", file!(), s.after_catch_line),
            root.clone(),
        ],
    );
    assert_stack(
        &s.child,
        0,
        &[
            running("walker_panic::healthy_leaf", file!(), s.child_line),
            awaiting("walker_panic::survivor", file!(), s.child_await_line),
            root,
        ],
    );
    // The published stack lost the unwound `mid` and `boom` frames too.
    assert_eq!(
        s.dumped,
        [
            (0, "walker_panic::survivor_root".to_owned()),
            (1, "walker_panic::survivor".to_owned()),
            (2, "walker_panic::healthy_leaf".to_owned())
        ]
    );
    assert_eq!(current_task_id(), None);
}

#[traced_async]
async fn sleeper() {
    std::future::pending::<()>().await;
}

#[traced_async]
async fn join_with_panic() {
    futures::join!(sleeper(), mid());
}

#[test]
fn panic_in_a_join_branch_with_a_suspended_sibling() {
    #[traced_async]
    async fn root(id: &AtomicU64) {
        id.store(current_task_id().unwrap(), Ordering::Relaxed);
        join_with_panic().await;
    }
    let id = AtomicU64::new(0);
    let result = catch_unwind(AssertUnwindSafe(|| futures::executor::block_on(root(&id))));
    assert!(result.is_err());
    let panicked = id.load(Ordering::Relaxed);
    check_idle_thread(panicked);
    check_healthy(&futures::executor::block_on(healthy()), panicked);
}

#[test]
fn current_task_id_is_none_after_a_panic_under_block_on() {
    let id = AtomicU64::new(0);
    let result = catch_unwind(AssertUnwindSafe(|| {
        futures::executor::block_on(doomed(&id))
    }));
    assert!(result.is_err());
    assert_ne!(id.load(Ordering::Relaxed), 0);
    // Outside any poll: no task, as before the panic.
    assert_eq!(current_task_id(), None);
}

#[test]
fn current_task_id_is_none_in_an_untraced_task_after_a_panicked_task() {
    // One worker: the untraced task runs on the thread the panic unwound.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    static ID: AtomicU64 = AtomicU64::new(0);
    assert!(rt.block_on(rt.spawn(doomed(&ID))).unwrap_err().is_panic());
    let seen = rt.block_on(rt.spawn(async { current_task_id() })).unwrap();
    assert_eq!(
        seen,
        None,
        "task {} panicked earlier",
        ID.load(Ordering::Relaxed)
    );
}

#[test]
fn spawn_from_untraced_code_after_a_panic_has_no_parent() {
    // `async_stack::tokio::spawn` records the current task as the parent;
    // after a panic, untraced code on the same thread is in no task.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    static ID: AtomicU64 = AtomicU64::new(0);
    assert!(rt.block_on(rt.spawn(doomed(&ID))).unwrap_err().is_panic());

    #[traced_async]
    async fn child() -> Option<u64> {
        let id = current_task_id().unwrap();
        async_stack::dump().task(id).unwrap().parent
    }
    let parent = rt.block_on(async { async_stack::tokio::spawn(child()).await.unwrap() });
    assert_eq!(
        parent,
        None,
        "task {} panicked earlier",
        ID.load(Ordering::Relaxed)
    );
}
