//! Deadlocks staged on purpose, reported with their exact edges: tasks,
//! resources, and the lines of every `lock()` and creation.
//!
//! Tests of one binary share the process's waits-for graph, so each looks
//! only at the deadlocks among its own tasks.

mod common;

use std::sync::Arc;

use async_stack::ResourceKind as K;
use async_stack::sync::{Mutex, RwLock, Semaphore};
use async_stack::tokio::{JoinHandle, spawn_named};
use async_stack::{ResourceKind, WaitEdge, traced_async};
use tokio::sync::oneshot;
use tokio::sync::oneshot::error::RecvError;

use common::{deadlock_of, task_id};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The line of this file that ends with the comment `// {marker}`.
fn line_of(marker: &str) -> u32 {
    common::marker_line("tests/deadlock_cycles.rs", marker)
}

/// What an edge says, in a form to compare: waiter, waiting-at line,
/// resource, creation line, holder, acquired-at line, and the line of the
/// wait it is queued behind.
type Seen = (
    u64,
    Option<u32>,
    ResourceKind,
    u32,
    u64,
    Option<u32>,
    Option<u32>,
);

/// An expected edge, its lines named by their markers ("": none).
fn expected(
    waiter: u64,
    waiting_at: &str,
    resource: ResourceKind,
    created_at: &str,
    holder: u64,
    acquired_at: &str,
    queued_behind: &str,
) -> Seen {
    let line = |marker: &str| (!marker.is_empty()).then(|| line_of(marker));
    (
        waiter,
        line(waiting_at),
        resource,
        line_of(created_at),
        holder,
        line(acquired_at),
        line(queued_behind),
    )
}

/// The edges of a deadlock of two, in the order a report lists them:
/// from the smaller task id.
fn from_smallest(mut edges: [Seen; 2]) -> Vec<Seen> {
    edges.sort_by_key(|e| e.0);
    edges.to_vec()
}

/// What an edge says, in a form to compare.
fn edge(e: &WaitEdge) -> Seen {
    assert_eq!(e.created_at.file, file!());
    (
        e.waiter,
        e.waiting_at.as_ref().map(|l| l.line),
        e.resource,
        e.created_at.line,
        e.holder,
        e.acquired_at.as_ref().map(|l| l.line),
        e.queued_ahead.as_ref().map(|l| l.line),
    )
}

#[traced_async]
async fn lock_both(
    first: Arc<Mutex<u8>>,
    second: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    go: oneshot::Receiver<()>,
) {
    let _a = first.lock().await; // FIRST_LOCK
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    // `_a` is held while waiting for the other.
    let _b = second.lock().await; // SECOND_LOCK
}

/// Stages `a` locking m1 then m2, `b` m2 then m1; returns the ids, in that
/// order, and the handles.
async fn inversion(
    m1: &Arc<Mutex<u8>>,
    m2: &Arc<Mutex<u8>>,
) -> ((u64, u64), JoinHandle<()>, JoinHandle<()>) {
    let (ready_a, id_a) = oneshot::channel();
    let (ready_b, id_b) = oneshot::channel();
    let (go_a, wait_a) = oneshot::channel();
    let (go_b, wait_b) = oneshot::channel();
    let ha = spawn_named("a", lock_both(m1.clone(), m2.clone(), ready_a, wait_a));
    let hb = spawn_named("b", lock_both(m2.clone(), m1.clone(), ready_b, wait_b));
    let ids = (id_a.await.unwrap(), id_b.await.unwrap());
    go_a.send(()).unwrap();
    go_b.send(()).unwrap();
    (ids, ha, hb)
}

#[test]
fn a_lock_order_inversion_names_both_tasks_and_all_four_lines() {
    rt().block_on(async {
        let m1 = Arc::new(Mutex::new(0)); // M1
        let m2 = Arc::new(Mutex::new(0)); // M2
        let ((a, b), _ha, _hb) = inversion(&m1, &m2).await;
        let d = deadlock_of(&[a, b]).await;
        let got: Vec<_> = d.edges.iter().map(edge).collect();
        // a holds m1 and waits for m2; b holds m2 and waits for m1.
        let a_edge = expected(a, "SECOND_LOCK", K::Mutex, "M2", b, "FIRST_LOCK", "");
        let b_edge = expected(b, "SECOND_LOCK", K::Mutex, "M1", a, "FIRST_LOCK", "");
        assert_eq!(got, from_smallest([a_edge, b_edge]));
        let names: Vec<_> = d.edges.iter().map(|e| e.waiter_name.clone()).collect();
        let want_names = if a < b { ["a", "b"] } else { ["b", "a"] };
        assert_eq!(names, want_names.map(|n| Some(n.to_owned())));
        let text = d.to_string();
        let file = file!();
        let (second, m2, first) = (line_of("SECOND_LOCK"), line_of("M2"), line_of("FIRST_LOCK"));
        assert!(
            text.starts_with("deadlock: 2 tasks wait for each other\n\n"),
            "{text}"
        );
        let a_paragraph = format!("task {a} \"a\" waits at {file}:{second}:");
        assert!(text.contains(&a_paragraph), "{text}");
        assert!(
            text.contains(&format!("for Mutex created at {file}:{m2}:")),
            "{text}"
        );
        assert!(
            text.contains(&format!("held by task {b} (acquired at {file}:{first}:")),
            "{text}"
        );
    });
}

#[test]
fn aborting_a_task_of_the_cycle_breaks_it() {
    rt().block_on(async {
        let m1 = Arc::new(Mutex::new(0));
        let m2 = Arc::new(Mutex::new(0));
        let ((a, b), ha, hb) = inversion(&m1, &m2).await;
        deadlock_of(&[a, b]).await;
        ha.abort();
        assert!(ha.await.unwrap_err().is_cancelled());
        // b got m1 and ends.
        hb.await.unwrap();
        assert!(
            async_stack::deadlocks()
                .iter()
                .all(|d| !d.tasks().contains(&a) && !d.tasks().contains(&b))
        );
    });
}

#[traced_async]
async fn relock(m: Arc<Mutex<u8>>, ready: oneshot::Sender<u64>) {
    let _a = m.lock().await; // RELOCK_FIRST
    ready.send(task_id()).unwrap();
    let _b = m.lock().await; // RELOCK_SECOND
}

#[test]
fn a_self_relock_is_a_cycle_of_one() {
    rt().block_on(async {
        let m = Arc::new(Mutex::new(0)); // M
        let (ready, t) = oneshot::channel();
        let _h = spawn_named("relock", relock(m, ready));
        let t = t.await.unwrap();
        let d = deadlock_of(&[t]).await;
        let got: Vec<_> = d.edges.iter().map(edge).collect();
        let want = expected(t, "RELOCK_SECOND", K::Mutex, "M", t, "RELOCK_FIRST", "");
        assert_eq!(got, [want]);
        let text = d.to_string();
        assert!(
            text.starts_with("deadlock: 1 task waits for itself\n\ntask "),
            "{text}"
        );
    });
}

#[traced_async]
async fn read_twice(l: Arc<RwLock<u8>>, ready: oneshot::Sender<u64>, go: oneshot::Receiver<()>) {
    let _a = l.read().await; // READ_FIRST
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    let _b = l.read().await; // READ_SECOND
}

#[traced_async]
async fn write(l: Arc<RwLock<u8>>, ready: oneshot::Sender<u64>) {
    ready.send(task_id()).unwrap();
    let _w = l.write().await; // WRITE
}

#[test]
fn a_reader_queued_behind_a_waiting_writer_waits_for_it() {
    rt().block_on(async {
        let l = Arc::new(RwLock::new(0)); // L
        let (ready_r, r) = oneshot::channel();
        let (go, wait) = oneshot::channel();
        let _hr = spawn_named("reader", read_twice(l.clone(), ready_r, wait));
        let r = r.await.unwrap();
        let (ready_w, w) = oneshot::channel();
        let _hw = spawn_named("writer", write(l.clone(), ready_w));
        let w = w.await.unwrap();
        // The writer is queued once it had a turn after its handshake.
        tokio::task::yield_now().await;
        go.send(()).unwrap();
        let d = deadlock_of(&[r, w]).await;
        let got: Vec<_> = d.edges.iter().map(edge).collect();
        let r_behind_w = expected(r, "READ_SECOND", K::RwLock, "L", w, "", "WRITE");
        let w_for_r = expected(w, "WRITE", K::RwLock, "L", r, "READ_FIRST", "");
        let r_holds = expected(r, "READ_SECOND", K::RwLock, "L", r, "READ_FIRST", "");
        let want = if r < w {
            vec![r_behind_w, w_for_r, r_holds]
        } else {
            vec![w_for_r, r_behind_w, r_holds]
        };
        assert_eq!(got, want);
    });
}

#[traced_async]
async fn await_other(ready: oneshot::Sender<u64>, other: oneshot::Receiver<JoinHandle<()>>) {
    ready.send(task_id()).unwrap();
    let h = other.await.unwrap();
    h.await.unwrap(); // AWAIT_HANDLE
}

#[test]
fn two_tasks_awaiting_each_others_handles() {
    rt().block_on(async {
        let (ready_a, a) = oneshot::channel();
        let (ready_b, b) = oneshot::channel();
        let (give_a, get_a) = oneshot::channel();
        let (give_b, get_b) = oneshot::channel();
        let ha = spawn_named("a", await_other(ready_a, get_a)); // SPAWN_A
        let hb = spawn_named("b", await_other(ready_b, get_b)); // SPAWN_B
        let hb_id = hb.id();
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        give_a.send(hb).unwrap();
        give_b.send(ha).unwrap();
        let d = deadlock_of(&[a, b]).await;
        let got: Vec<_> = d.edges.iter().map(edge).collect();
        // The line of each handle's `.await`, from the waiter's frame.
        let a_edge = expected(a, "AWAIT_HANDLE", K::JoinHandle, "SPAWN_B", b, "", "");
        let b_edge = expected(b, "AWAIT_HANDLE", K::JoinHandle, "SPAWN_A", a, "", "");
        assert_eq!(got, from_smallest([a_edge, b_edge]));
        let spawn_b = line_of("SPAWN_B");
        let text = d.to_string();
        let want = format!("for the end of task {b}, spawned at {}:{spawn_b}:", file!());
        assert!(text.contains(&want), "{text}");

        // The dump shows the same wait under the frame that awaits the
        // handle, with that `.await` as its line.
        let dump = async_stack::dump();
        let task_a = dump.task(a).expect("a is live");
        let tokio_b: u64 = hb_id.to_string().parse().unwrap();
        assert_eq!(task_a.waits.len(), 1);
        let w = &task_a.waits[0];
        assert_eq!(w.resource, K::JoinHandle);
        assert_eq!(w.tokio_task, Some(tokio_b));
        assert_eq!(w.created_at.line, spawn_b);
        assert_eq!(
            w.waiting_at.as_ref().map(|l| l.line),
            Some(line_of("AWAIT_HANDLE"))
        );
        let text = task_a.to_string();
        let frame = format!("awaiting at {}:{}:", file!(), line_of("AWAIT_HANDLE"));
        let wait = format!(
            "waiting for JoinHandle of tokio task {tokio_b} spawned at {}:{spawn_b}:",
            file!()
        );
        let (f, w) = (text.find(&frame), text.find(&wait));
        assert!(
            f.is_some() && w.is_some() && f < w,
            "the wait under its frame:\n{text}"
        );
    });
}

#[traced_async]
async fn party_a(
    m: Arc<Mutex<u8>>,
    s: Arc<Semaphore>,
    ready: oneshot::Sender<u64>,
    go: oneshot::Receiver<()>,
) {
    let _m = m.lock().await; // HOLD_M
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    let _s = s.acquire().await.unwrap(); // WAIT_S
}

#[traced_async]
async fn party_b(
    s: Arc<Semaphore>,
    l: Arc<RwLock<u8>>,
    ready: oneshot::Sender<u64>,
    go: oneshot::Receiver<()>,
) {
    let _s = s.acquire().await.unwrap(); // HOLD_S
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    let _l = l.write().await; // WAIT_L
}

#[traced_async]
async fn party_c(
    l: Arc<RwLock<u8>>,
    m: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    go: oneshot::Receiver<()>,
) {
    let _l = l.read().await; // HOLD_L
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    let _m = m.lock().await; // WAIT_M
}

#[test]
fn a_three_party_cycle_through_mutex_semaphore_and_rwlock() {
    rt().block_on(async {
        let m = Arc::new(Mutex::new(0)); // M3
        let s = Arc::new(Semaphore::new(1)); // S3
        let l = Arc::new(RwLock::new(0)); // L3
        let (ra, a) = oneshot::channel();
        let (rb, b) = oneshot::channel();
        let (rc, c) = oneshot::channel();
        let (ga, wa) = oneshot::channel();
        let (gb, wb) = oneshot::channel();
        let (gc, wc) = oneshot::channel();
        let _ha = spawn_named("a", party_a(m.clone(), s.clone(), ra, wa));
        let _hb = spawn_named("b", party_b(s.clone(), l.clone(), rb, wb));
        let _hc = spawn_named("c", party_c(l.clone(), m.clone(), rc, wc));
        let (a, b, c) = (a.await.unwrap(), b.await.unwrap(), c.await.unwrap());
        for g in [ga, gb, gc] {
            g.send(()).unwrap();
        }
        let d = deadlock_of(&[a, b, c]).await;
        let got: Vec<_> = d.edges.iter().map(edge).collect();
        let mut want = vec![
            expected(a, "WAIT_S", K::Semaphore, "S3", b, "HOLD_S", ""),
            expected(b, "WAIT_L", K::RwLock, "L3", c, "HOLD_L", ""),
            expected(c, "WAIT_M", K::Mutex, "M3", a, "HOLD_M", ""),
        ];
        // The cycle starts from the smallest task id.
        let first = want.iter().position(|e| e.0 == a.min(b).min(c)).unwrap();
        want.rotate_left(first);
        assert_eq!(got, want);
    });
}

/// Takes `m` once told to.
#[traced_async]
async fn lock_when_told(m: Arc<Mutex<u8>>, ready: oneshot::Sender<u64>, go: oneshot::Receiver<()>) {
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    let _g = m.lock().await; // LOCK_WHEN_TOLD
}

/// Holds `m`, races the handle it is given against a branch that is
/// ready at once (the handle is polled first, and waits), keeps the
/// handle, waits for `release`, then awaits the handle for good, still
/// holding `m`.
#[traced_async]
async fn race_and_keep(
    m: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    other: oneshot::Receiver<JoinHandle<()>>,
    release: oneshot::Receiver<()>,
) {
    let held = m.lock().await; // HOLD_KEPT
    ready.send(task_id()).unwrap();
    let mut h = other.await.unwrap();
    tokio::select! {
        biased;
        _ = &mut h => unreachable!("its task waits for the lock"),
        () = std::future::ready(()) => {}
    }
    release.await.unwrap(); // RELEASE
    h.await.unwrap(); // AWAIT_KEPT
    drop(held);
}

/// Whether the dump shows `task` suspended at the line `marker`.
fn awaits_at(task: u64, marker: &str) -> bool {
    let line = line_of(marker);
    async_stack::dump().task(task).is_some_and(|t| {
        t.frames
            .iter()
            .any(|f| f.awaiting_at.as_ref().is_some_and(|l| l.line == line))
    })
}

/// Task `a`, which holds the `Mutex` task `b` waits for, waits for
/// nothing in the dump, and no deadlock holds either (checked over ten
/// turns of the runtime).
async fn waits_for_nothing_b_waits_for_it(a: u64, b: u64) {
    let dump = async_stack::dump();
    let task_a = dump.task(a).expect("a is live");
    assert!(task_a.waits.is_empty(), "{task_a}");
    let task_b = dump.task(b).expect("b is live");
    assert_eq!(task_b.waits[0].resource, K::Mutex);
    assert_eq!(task_b.waits[0].holders[0].task, a);
    in_no_deadlock(a, b).await;
}

/// Neither `a` nor `b` is in a deadlock, over ten turns of the runtime.
async fn in_no_deadlock(a: u64, b: u64) {
    for _ in 0..10 {
        let found = async_stack::deadlocks();
        assert!(
            found
                .iter()
                .all(|d| !d.tasks().contains(&a) && !d.tasks().contains(&b)),
            "{found:?}"
        );
        tokio::task::yield_now().await;
    }
}

/// Yields until the dump shows `task` waiting for one resource.
async fn until_waiting(what: &str, task: u64) {
    until(what, || {
        async_stack::dump()
            .task(task)
            .is_some_and(|t| t.waits.len() == 1)
    })
    .await;
}

/// Yields to the runtime until `done`, up to 1,000 turns.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{what}: not after 1,000 turns");
}

#[test]
fn a_handle_raced_in_select_and_kept_waits_only_where_it_is_awaited_again() {
    rt().block_on(async {
        let m = Arc::new(Mutex::new(0)); // M_KEPT
        let (ready_b, b) = oneshot::channel();
        let (go_b, told) = oneshot::channel();
        let hb = spawn_named("b", lock_when_told(m.clone(), ready_b, told)); // SPAWN_KEPT
        let b = b.await.unwrap();
        let (ready_a, a) = oneshot::channel();
        let (give_a, get_a) = oneshot::channel();
        let (release, released) = oneshot::channel();
        let ha = spawn_named("a", race_and_keep(m.clone(), ready_a, get_a, released));
        let a = a.await.unwrap();
        // b waits for the lock a holds; a polls b's handle once, keeps it,
        // and goes on to wait for `release`, which this test holds.
        go_b.send(()).unwrap();
        give_a.send(hb).unwrap();
        until_waiting("b waits for the lock", b).await;
        until("a waits at RELEASE", || awaits_at(a, "RELEASE")).await;

        // b waits for a, but a waits for this test, not for b.
        waits_for_nothing_b_waits_for_it(a, b).await;

        // Awaited again, at another `.await`, the handle waits there: now
        // a holds the lock b waits for, and waits for b's end.
        release.send(()).unwrap();
        let d = deadlock_of(&[a, b]).await;
        let got: Vec<_> = d.edges.iter().map(edge).collect();
        let a_edge = expected(a, "AWAIT_KEPT", K::JoinHandle, "SPAWN_KEPT", b, "", "");
        let b_edge = expected(b, "LOCK_WHEN_TOLD", K::Mutex, "M_KEPT", a, "HOLD_KEPT", "");
        assert_eq!(got, from_smallest([a_edge, b_edge]));
        ha.abort();
        assert!(ha.await.unwrap_err().is_cancelled());
    });
}

#[traced_async]
async fn never() {
    std::future::pending::<()>().await; // NEVER
}

/// Holds `m` and waits for the handle it is given, or for a traced fn
/// that never ends, in one `select!`.
#[traced_async]
async fn hold_and_select(
    m: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    other: oneshot::Receiver<JoinHandle<()>>,
) {
    let _held = m.lock().await; // HOLD
    ready.send(task_id()).unwrap();
    let mut h = other.await.unwrap();
    tokio::select! { // SELECT
        _ = &mut h => {}
        () = never() => {}
    }
}

#[test]
fn a_handle_awaited_in_select_beside_a_traced_branch_waits_at_the_select() {
    rt().block_on(async {
        let m = Arc::new(Mutex::new(0)); // M_SELECT
        let (ready_b, b) = oneshot::channel();
        let (go_b, told) = oneshot::channel();
        let hb = spawn_named("b", lock_when_told(m.clone(), ready_b, told)); // SPAWN_TOLD
        let hb_id = hb.id();
        let b = b.await.unwrap();
        let (ready_a, a) = oneshot::channel();
        let (give_a, get_a) = oneshot::channel();
        let ha = spawn_named("a", hold_and_select(m.clone(), ready_a, get_a));
        let a = a.await.unwrap();
        go_b.send(()).unwrap();
        give_a.send(hb).unwrap();

        // a's deepest frame is `never`'s, at NEVER; a waits for b at the
        // `select!` that polls b's handle.
        let d = deadlock_of(&[a, b]).await;
        let got: Vec<_> = d.edges.iter().map(edge).collect();
        let a_edge = expected(a, "SELECT", K::JoinHandle, "SPAWN_TOLD", b, "", "");
        let b_edge = expected(b, "LOCK_WHEN_TOLD", K::Mutex, "M_SELECT", a, "HOLD", "");
        assert_eq!(got, from_smallest([a_edge, b_edge]));

        // The dump shows the wait at that line, under the frame at it.
        let dump = async_stack::dump();
        let task_a = dump.task(a).expect("a is live");
        assert_eq!(task_a.waits.len(), 1, "{task_a}");
        let w = &task_a.waits[0];
        assert_eq!(w.resource, K::JoinHandle);
        assert_eq!(
            w.waiting_at.as_ref().map(|l| l.line),
            Some(line_of("SELECT"))
        );
        let tokio_b: u64 = hb_id.to_string().parse().unwrap();
        let text = task_a.to_string();
        let select = format!("awaiting at {}:{}:", file!(), line_of("SELECT"));
        let wait = format!("waiting for JoinHandle of tokio task {tokio_b} spawned at");
        let (s, w) = (text.find(&select), text.find(&wait));
        assert!(
            s.is_some()
                && w.is_some()
                && s < w
                && text[s.unwrap()..w.unwrap()].lines().count() == 2,
            "the wait right under the `select!`'s frame:\n{text}"
        );

        ha.abort();
        assert!(ha.await.unwrap_err().is_cancelled());
    });
}

/// Holds `mine`, then waits for `theirs` once told to.
#[traced_async]
async fn hold_then_lock(
    mine: Arc<Mutex<u8>>,
    theirs: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    go: oneshot::Receiver<()>,
) {
    let _mine = mine.lock().await; // HOLD_THEN
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    let _theirs = theirs.lock().await; // THEN_LOCK
}

/// How a kept acquire is polled first.
#[derive(Clone, Copy)]
enum FirstPoll {
    /// Raced in a `select!` against a branch that is ready at once.
    Select,
    /// Polled once between two `.await`s (`now_or_never()`).
    Once,
    /// Raced in a `select!` through a generic helper, [`run`], which the
    /// task then calls again to wait for something else at the same
    /// `.await` line.
    Helper,
}

/// Awaits `f`: one `.await` line for whatever it is called with.
#[traced_async]
async fn run<F: std::future::Future>(f: F) -> F::Output {
    f.await
}

/// Holds `mine`, polls an acquire of `theirs` once as `first` says (it
/// queues), keeps the acquire, waits for `release`, then awaits the
/// acquire for good.
#[traced_async]
async fn race_lock_and_keep(
    mine: Arc<Mutex<u8>>,
    theirs: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    release: oneshot::Receiver<()>,
    first: FirstPoll,
) {
    let _mine = mine.lock().await; // HOLD_RACER
    ready.send(task_id()).unwrap();
    let mut acquire = std::pin::pin!(theirs.lock()); // RACED_LOCK
    match first {
        FirstPoll::Select => tokio::select! {
            biased;
            _ = &mut acquire => unreachable!("its lock is held"),
            () = std::future::ready(()) => {}
        },
        FirstPoll::Once => {
            let got = futures::FutureExt::now_or_never(acquire.as_mut());
            assert!(got.is_none(), "its lock is held");
        }
        FirstPoll::Helper => tokio::select! {
            biased;
            _ = run(&mut acquire) => unreachable!("its lock is held"),
            () = std::future::ready(()) => {}
        },
    }
    type Release =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), RecvError>> + Send>>;
    let release: Release = match first {
        FirstPoll::Helper => Box::pin(run(release)),
        _ => Box::pin(release),
    };
    release.await.unwrap(); // LOCK_RELEASE
    let _theirs = acquire.await; // LOCK_KEPT
}

#[test]
fn an_acquire_raced_in_select_and_kept_waits_only_where_it_is_awaited_again() {
    kept_acquire_waits_only_where_it_is_awaited_again(FirstPoll::Select);
}

#[test]
fn an_acquire_polled_once_between_awaits_and_kept_waits_only_where_it_is_awaited() {
    kept_acquire_waits_only_where_it_is_awaited_again(FirstPoll::Once);
}

#[test]
fn an_acquire_kept_from_a_helper_waits_not_where_the_helper_waits_again() {
    kept_acquire_waits_only_where_it_is_awaited_again(FirstPoll::Helper);
}

/// A task holds a lock and polls an acquire of another task's lock once
/// (`first`), keeps it and waits for this test: no wait of its, no
/// deadlock; then it awaits the acquire: a deadlock.
fn kept_acquire_waits_only_where_it_is_awaited_again(first: FirstPoll) {
    kept_future_waits_only_where_it_is_awaited_again(
        |mine, theirs, ready, release| race_lock_and_keep(mine, theirs, ready, release, first),
        ["LOCK_RELEASE", "RACED_LOCK", "HOLD_RACER"],
    );
}

/// Task `a`, spawned as `racer(mine, theirs, ready, release)`, holds
/// `mine`, polls a wait for `theirs` (which `b` holds) and keeps it
/// while it waits for `release` at the line of the marker `lines[0]`:
/// no wait of its, no deadlock; then it awaits the kept future again:
/// a deadlock, `a` waiting at `lines[1]` and holding since `lines[2]`.
fn kept_future_waits_only_where_it_is_awaited_again<F>(
    racer: impl FnOnce(Arc<Mutex<u8>>, Arc<Mutex<u8>>, oneshot::Sender<u64>, oneshot::Receiver<()>) -> F,
    lines: [&str; 3],
) where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let [parks, waits, holds] = lines;
    rt().block_on(async {
        let m1 = Arc::new(Mutex::new(0)); // RACE_M1
        let m2 = Arc::new(Mutex::new(0)); // RACE_M2
        let (ready_b, b) = oneshot::channel();
        let (go_b, told) = oneshot::channel();
        let _hb = spawn_named("b", hold_then_lock(m2.clone(), m1.clone(), ready_b, told));
        let b = b.await.unwrap();
        let (ready_a, a) = oneshot::channel();
        let (release, released) = oneshot::channel();
        let ha = spawn_named("a", racer(m1.clone(), m2.clone(), ready_a, released));
        let a = a.await.unwrap();
        go_b.send(()).unwrap();
        until_waiting("b waits for a's lock", b).await;
        until(parks, || awaits_at(a, parks)).await;

        // a's wait is still queued for b's lock, but a waits for this
        // test, not for b.
        waits_for_nothing_b_waits_for_it(a, b).await;

        // Awaited again, the kept future waits there: a real deadlock now.
        release.send(()).unwrap();
        let d = deadlock_of(&[a, b]).await;
        let got: Vec<_> = d.edges.iter().map(edge).collect();
        let a_edge = expected(a, waits, K::Mutex, "RACE_M2", b, "HOLD_THEN", "");
        let b_edge = expected(b, "THEN_LOCK", K::Mutex, "RACE_M1", a, holds, "");
        assert_eq!(got, from_smallest([a_edge, b_edge]));
        let task_a = async_stack::dump().task(a).expect("a is live").clone();
        assert_eq!(task_a.waits.len(), 1, "{task_a}");
        ha.abort();
        assert!(ha.await.unwrap_err().is_cancelled());
    });
}

/// Holds one permit of `s` until `done`.
#[traced_async]
async fn hold_permit(s: Arc<Semaphore>, ready: oneshot::Sender<()>, done: oneshot::Receiver<()>) {
    let _permit = s.acquire().await.unwrap();
    ready.send(()).unwrap();
    let _ = done.await;
}

/// Queues for two permits of `s`, keeps that acquire (its place in the
/// queue) once told to go on, waits for `m`, then for the permits.
#[traced_async]
async fn keep_permits_then_lock(
    s: Arc<Semaphore>,
    m: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    go: oneshot::Receiver<()>,
) {
    let mut acquire = std::pin::pin!(s.acquire_many(2));
    tokio::select! {
        biased;
        _ = &mut acquire => unreachable!("one permit is left"),
        () = std::future::ready(()) => {}
    }
    ready.send(task_id()).unwrap();
    go.await.unwrap();
    let _m = m.lock().await; // LOCK_AFTER_KEEP
    let _permits = acquire.await;
}

/// Holds `m`, then queues for a permit of `s`.
#[traced_async]
async fn hold_then_permit(m: Arc<Mutex<u8>>, s: Arc<Semaphore>, ready: oneshot::Sender<u64>) {
    let _m = m.lock().await;
    ready.send(task_id()).unwrap();
    let _permit = s.acquire().await.unwrap();
}

/// The queue of a `Semaphore` that nine free tasks hold: `a` kept an
/// acquire ahead of `x` and then waits for `x`'s lock. `x` waits for the
/// holders (through `a`'s place in the queue, which holds no wait of
/// `a`'s any more), who are free: no deadlock, and every task ends once
/// the holders let go.
#[test]
fn a_kept_acquire_ahead_in_a_queue_does_not_cut_the_waiters_behind_from_the_holders() {
    rt().block_on(async {
        const HOLDERS: usize = 9; // past the 8 holders each waiter names
        let s = Arc::new(Semaphore::new(HOLDERS + 1));
        let m = Arc::new(Mutex::new(0));
        let mut release = Vec::new();
        for i in 0..HOLDERS {
            let (ready, held) = oneshot::channel();
            let (done, wait) = oneshot::channel();
            let _h = spawn_named(format!("holder {i}"), hold_permit(s.clone(), ready, wait));
            held.await.unwrap();
            release.push(done);
        }
        let (ready_a, a) = oneshot::channel();
        let (go_a, told) = oneshot::channel();
        let ha = spawn_named(
            "a",
            keep_permits_then_lock(s.clone(), m.clone(), ready_a, told),
        );
        let a = a.await.unwrap();
        let (ready_x, x) = oneshot::channel();
        let hx = spawn_named("x", hold_then_permit(m.clone(), s.clone(), ready_x));
        let x = x.await.unwrap();
        go_a.send(()).unwrap();
        until_waiting("x queues behind a", x).await;
        until("a waits for x's lock", || awaits_at(a, "LOCK_AFTER_KEEP")).await;
        let dump = async_stack::dump();
        let task_a = dump.task(a).expect("a is live");
        assert_eq!(task_a.waits.len(), 1, "{task_a}");
        assert_eq!(task_a.waits[0].resource, K::Mutex, "{task_a}");
        in_no_deadlock(a, x).await;
        for done in release {
            done.send(()).unwrap();
        }
        hx.await.unwrap();
        ha.await.unwrap();
    });
}

/// Locks `m` in a traced fn of its own: the wait is this frame's.
#[traced_async]
async fn lock_in_fn(m: Arc<Mutex<u8>>) {
    let _g = m.lock().await; // FN_LOCK
}

/// Locks `m` one traced fn further down: the wait is `lock_in_fn`'s,
/// two frames below the task's root.
#[traced_async]
async fn lock_via_fn(m: Arc<Mutex<u8>>) {
    lock_in_fn(m).await; // VIA_FN
}

/// Holds `mine`, races `lock_in_fn(theirs)` (or, `nested`,
/// `lock_via_fn(theirs)`) in a `select!` on `&mut` against a branch that
/// is ready at once, keeps it (its frames stay suspended where they were,
/// `FN_LOCK` at the bottom), waits for `release`, then awaits it for
/// good.
#[traced_async]
async fn race_fn_and_keep(
    mine: Arc<Mutex<u8>>,
    theirs: Arc<Mutex<u8>>,
    ready: oneshot::Sender<u64>,
    release: oneshot::Receiver<()>,
    nested: bool,
) {
    let _mine = mine.lock().await; // HOLD_FN_RACER
    ready.send(task_id()).unwrap();
    let mut locking: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = if nested {
        Box::pin(lock_via_fn(theirs))
    } else {
        Box::pin(lock_in_fn(theirs))
    };
    tokio::select! {
        biased;
        () = &mut locking => unreachable!("its lock is held"),
        () = std::future::ready(()) => {}
    }
    release.await.unwrap(); // FN_RELEASE
    locking.await; // FN_KEPT
}

/// The kept future is a traced fn whose own frame polled the acquire: its
/// frame stays suspended at the lock's `.await` while the task waits
/// elsewhere, so only the frames above it can tell that nothing awaits
/// it.
#[test]
fn a_traced_fn_raced_in_select_and_kept_waits_only_once_awaited_again() {
    kept_future_waits_only_where_it_is_awaited_again(
        |mine, theirs, ready, release| race_fn_and_keep(mine, theirs, ready, release, false),
        ["FN_RELEASE", "FN_LOCK", "HOLD_FN_RACER"],
    );
}

/// The same two levels down: the waiting frame and its parent both stay
/// where they were; only the task's root went on.
#[test]
fn a_traced_fn_kept_two_levels_above_its_wait_waits_only_once_awaited_again() {
    kept_future_waits_only_where_it_is_awaited_again(
        |mine, theirs, ready, release| race_fn_and_keep(mine, theirs, ready, release, true),
        ["FN_RELEASE", "FN_LOCK", "HOLD_FN_RACER"],
    );
}
