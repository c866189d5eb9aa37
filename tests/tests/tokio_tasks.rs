//! Plain `tokio::spawn` tasks, whole: every traced root first polled inside
//! one tokio task is one entry of a dump, with the tokio task's id (the one
//! `JoinHandle::id()` displays) and each root a top-level branch in the
//! order of their first poll. Checked with `join!`, `select!` and
//! `FuturesUnordered`, on a current-thread runtime, a multi-thread one and
//! a `LocalSet`, against what a user sees: the entry's fields, its text and
//! its JSON.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_stack::dump::{live_tasks, write_text};
use async_stack::{TaskDump, TaskInfo, TaskState, dump, traced_async};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::oneshot;

#[traced_async]
async fn left(rx: oneshot::Receiver<u8>) -> u8 {
    rx.await.unwrap_or(0)
}
const LEFT_AWAIT: u32 = line!() - 2;

#[traced_async]
async fn right(rx: oneshot::Receiver<u8>) -> u8 {
    rx.await.unwrap_or(0)
}
const RIGHT_AWAIT: u32 = line!() - 2;

#[traced_async]
async fn after(rx: oneshot::Receiver<u8>) -> u8 {
    rx.await.unwrap_or(0)
}
const AFTER_AWAIT: u32 = line!() - 2;

/// Used only outside tokio tasks.
#[traced_async]
async fn lone(rx: oneshot::Receiver<u8>) -> u8 {
    rx.await.unwrap_or(0)
}
const LONE_AWAIT: u32 = line!() - 2;

/// `(function, line of the .await it is parked on)` of each root (depth-0
/// frame) of `t`, in order.
fn roots(t: &TaskInfo) -> Vec<(String, u32)> {
    t.frames
        .iter()
        .filter(|f| f.depth == 0)
        .map(|f| {
            let at = f.awaiting_at.as_ref().expect("parked on an .await");
            assert!(at.file.ends_with("tokio_tasks.rs"), "{}", at.file);
            let name = f.function.rsplit("::").next().unwrap().to_owned();
            (name, at.line)
        })
        .collect()
}

/// The entries of the dump filed under tokio task `id` (`JoinHandle::id()`
/// as displayed).
fn entries_of(d: &TaskDump, id: &tokio::task::Id) -> Vec<TaskInfo> {
    let id: u64 = id.to_string().parse().unwrap();
    d.tasks
        .iter()
        .filter(|t| t.tokio_id == Some(id))
        .cloned()
        .collect()
}

/// Waits (polling the dump, yielding to the runtime in between) until the
/// tokio task `id` shows with `branches` roots, and returns its entry.
async fn settled(id: &tokio::task::Id, branches: usize) -> TaskInfo {
    for _ in 0..2_000 {
        let found = entries_of(&dump(), id);
        if let [t] = &found[..]
            && t.branches.len() == branches
            && t.state == TaskState::Idle
        {
            return t.clone();
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!(
        "tokio task {id} never showed idle with {branches} roots: {}",
        dump()
    );
}

/// The exact header of an idle entry, up to its time in state.
fn header(t: &TaskInfo, tokio_id: &tokio::task::Id) -> String {
    let roots = t
        .branches
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if t.branches.len() > 1 {
        format!(
            "task {} (tokio task {tokio_id}; roots {roots}) [idle ",
            t.id
        )
    } else {
        format!("task {} (tokio task {tokio_id}) [idle ", t.id)
    }
}

/// A `join!` of two traced roots inside a plain `tokio::spawn` is one
/// entry: its id is the first root's, it carries the tokio id, both roots
/// are branches (left, then right) parked on their exact lines; the text,
/// the streamed text and the JSON all say so.
async fn join_case() {
    let (ltx, lrx) = oneshot::channel();
    let (rtx, rrx) = oneshot::channel();
    let h = tokio::spawn(async move { tokio::join!(left(lrx), right(rrx)) });
    let t = settled(&h.id(), 2).await;
    assert_eq!(
        roots(&t),
        [("left".into(), LEFT_AWAIT), ("right".into(), RIGHT_AWAIT)]
    );
    assert_eq!(t.id, t.branches[0]);
    assert_eq!(t.tokio_id.map(|n| n.to_string()), Some(h.id().to_string()));
    assert_eq!(t.frames.len(), 2, "{t}");
    assert_eq!(t.polls, 1);
    assert_eq!(t.name, None);
    assert_eq!(t.spawned_at, None);
    assert!(t.root.as_deref().unwrap().ends_with("::left"));
    // No other entry shows either root.
    let d = dump();
    for b in &t.branches {
        let holding: Vec<u64> = d
            .tasks
            .iter()
            .filter(|e| e.branches.contains(b))
            .map(|e| e.id)
            .collect();
        assert_eq!(holding, [t.id]);
    }
    assert_eq!(d.task(t.branches[1]).map(|e| e.id), Some(t.id));

    let text = t.to_string();
    assert!(text.starts_with(&header(&t, &h.id())), "{text}");
    let left_at = format!("tokio_tasks.rs:{LEFT_AWAIT}:");
    let right_at = format!("tokio_tasks.rs:{RIGHT_AWAIT}:");
    assert!(
        text.find(&left_at).unwrap() < text.find(&right_at).unwrap(),
        "{text}"
    );
    // The streamed text holds the same entry.
    let mut streamed = Vec::new();
    write_text(&mut streamed).unwrap();
    let streamed = String::from_utf8(streamed).unwrap();
    assert!(streamed.contains(&header(&t, &h.id())), "{streamed}");
    // The JSON: version 3, read back whole.
    let d = dump();
    let json = d.to_json();
    assert!(json.starts_with("{\"version\":3,"), "{json}");
    let needle = format!(
        "{{\"id\":{},\"tokio_id\":{},\"branches\":[{},{}],",
        t.id,
        h.id(),
        t.branches[0],
        t.branches[1]
    );
    assert!(json.contains(&needle), "{json}");
    assert_eq!(TaskDump::from_json(&json).unwrap(), d);
    let errors = common::dump_schema_errors(&json);
    assert!(errors.is_empty(), "schema errors: {errors:?}");
    // A filter sees the entry's status once, with the first root's id.
    let mut seen = 0;
    live_tasks().filter(|s| s.id == t.id).for_each(|e| {
        assert_eq!(e.branches, t.branches);
        seen += 1;
    });
    assert_eq!(seen, 1);

    ltx.send(1).unwrap();
    rtx.send(2).unwrap();
    assert_eq!(h.await.unwrap(), (1, 2));
}

/// `select!` drops the losing branch: the entry loses that root, and a
/// root polled later joins it as a new branch.
async fn select_case() {
    let (ltx, lrx) = oneshot::channel();
    let (_rtx, rrx) = oneshot::channel::<u8>();
    let (atx, arx) = oneshot::channel();
    let h = tokio::spawn(async move {
        // Biased: the branches are first polled in source order (tokio
        // picks a random start otherwise).
        let first = tokio::select! {
            biased;
            v = left(lrx) => v,
            v = right(rrx) => v,
        };
        first + after(arx).await
    });
    let t = settled(&h.id(), 2).await;
    let (left_id, right_id) = (t.branches[0], t.branches[1]);
    assert_eq!(
        roots(&t),
        [("left".into(), LEFT_AWAIT), ("right".into(), RIGHT_AWAIT)]
    );
    ltx.send(5).unwrap();
    // `right` was dropped with the select; `after` is the one root left.
    let t = settled(&h.id(), 1).await;
    assert_eq!(roots(&t), [("after".into(), AFTER_AWAIT)]);
    assert!(!t.branches.contains(&left_id) && !t.branches.contains(&right_id));
    assert!(t.to_string().starts_with(&header(&t, &h.id())));
    atx.send(1).unwrap();
    assert_eq!(h.await.unwrap(), 6);
}

/// Roots in a `FuturesUnordered`: one entry, branches in the order they
/// were first polled; one that completes leaves, the others keep theirs.
async fn unordered_case() {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..3).map(|_| oneshot::channel::<u8>()).unzip();
    let h = tokio::spawn(async move {
        let mut set: FuturesUnordered<_> = rxs.into_iter().map(after).collect();
        let mut sum = 0;
        while let Some(v) = set.next().await {
            sum += v;
        }
        sum
    });
    let t = settled(&h.id(), 3).await;
    assert_eq!(roots(&t), vec![("after".to_owned(), AFTER_AWAIT); 3]);
    let [a, b, c] = t.branches[..] else {
        unreachable!()
    };
    let mut txs = txs.into_iter();
    let (t0, t1, t2) = (
        txs.next().unwrap(),
        txs.next().unwrap(),
        txs.next().unwrap(),
    );
    // The set first polls its futures in the order they were pushed: the
    // first branch waits on the first channel. When it completes, the
    // other two keep their order.
    t0.send(1).unwrap();
    let t = settled(&h.id(), 2).await;
    assert_eq!(t.branches, [b, c], "{t}");
    assert_eq!(t.id, b);
    assert!(a != b && b != c);
    t2.send(3).unwrap();
    let t = settled(&h.id(), 1).await;
    assert_eq!(t.branches, [b]);
    t1.send(2).unwrap();
    assert_eq!(h.await.unwrap(), 6);
}

/// Tasks spawned through the crate's helpers carry their tokio id too.
async fn helper_case() {
    let (tx, rx) = oneshot::channel();
    let h = async_stack::tokio::spawn_named("helper", left(rx));
    let t = settled(&h.id(), 1).await;
    assert_eq!(t.name.as_deref(), Some("helper"));
    assert!(t.spawned_at.is_some());
    assert_eq!(roots(&t), [("left".into(), LEFT_AWAIT)]);
    let text = t.to_string();
    assert!(
        text.starts_with(&format!(
            "task {} \"helper\" (tokio task {}) [idle ",
            t.id,
            h.id()
        )),
        "{text}"
    );
    tx.send(1).unwrap();
    assert_eq!(h.await.unwrap(), 1);
}

/// A task spawned through the helper keeps its name and spawn line
/// whichever of its roots ends first: a root that ends before the next
/// one starts (a handler called once per message), then a `join!` whose
/// first branch ends first.
async fn helper_roots_one_after_the_other_case() {
    let (tx1, rx1) = oneshot::channel();
    let (tx2, rx2) = oneshot::channel();
    let (tx3, rx3) = oneshot::channel();
    let line = line!() + 1;
    let h = async_stack::tokio::spawn_named("worker", async move {
        let first = left(rx1).await;
        let (a, b) = tokio::join!(right(rx2), after(rx3));
        first + a + b
    });
    let check = |t: &TaskInfo, want: &[(&str, u32)]| {
        assert_eq!(t.name.as_deref(), Some("worker"), "{t}");
        let at = t.spawned_at.as_ref().expect("its spawn line");
        assert_eq!((&*at.file, at.line), (file!(), line), "{t}");
        let want: Vec<(String, u32)> = want.iter().map(|&(f, l)| (f.into(), l)).collect();
        assert_eq!(roots(t), want, "{t}");
        // (The other runtime's test runs the same case at once.)
        let named = dump().with_name_containing("worker");
        let ours = named.tasks.iter().filter(|x| x.tokio_id == t.tokio_id);
        assert_eq!(ours.count(), 1, "{named}");
    };
    check(&settled(&h.id(), 1).await, &[("left", LEFT_AWAIT)]);
    tx1.send(1).unwrap();
    let both = settled(&h.id(), 2).await;
    check(&both, &[("right", RIGHT_AWAIT), ("after", AFTER_AWAIT)]);
    tx2.send(2).unwrap();
    let last = settled(&h.id(), 1).await;
    assert_eq!(last.branches, [both.branches[1]]);
    check(&last, &[("after", AFTER_AWAIT)]);
    tx3.send(3).unwrap();
    assert_eq!(h.await.unwrap(), 6);
}

async fn all_cases() {
    join_case().await;
    select_case().await;
    unordered_case().await;
    helper_case().await;
    helper_roots_one_after_the_other_case().await;
}

#[test]
fn current_thread_runtime() {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(all_cases());
}

#[test]
fn multi_thread_runtime() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
        .block_on(all_cases());
}

/// A task spawned through the helper is in dumps from its spawn: on a
/// current-thread runtime, before the spawning task yields (so before its
/// first poll), it shows scheduled, never polled, without frames, with its
/// name and spawn line; once polled, the same entry (same id) carries its
/// tokio task and its root's frame.
#[test]
fn a_task_spawned_through_the_helper_is_in_dumps_before_its_first_poll() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let (tx, rx) = oneshot::channel();
        let h = async_stack::tokio::spawn_named("not yet polled", left(rx));
        let spawned_line = line!() - 1;
        let before = dump();
        let queued: Vec<&TaskInfo> = before
            .tasks
            .iter()
            .filter(|t| t.name.as_deref() == Some("not yet polled"))
            .collect();
        let [t] = &queued[..] else {
            panic!("one queued task: {before}")
        };
        assert_eq!(
            (t.state, t.polls, t.frames.len(), t.root.as_deref()),
            (TaskState::Scheduled, 0, 0, None),
            "{before}"
        );
        assert_eq!((t.tokio_id, &t.branches[..]), (None, &[t.id][..]));
        assert!(!t.stack_unavailable);
        let at = t.spawned_at.as_ref().expect("a spawn site");
        assert_eq!((at.file.as_ref(), at.line), (file!(), spawned_line));
        let text = t.to_string();
        let header = text.lines().next().unwrap_or_default();
        assert!(
            header.starts_with(&format!("task {} \"not yet polled\" [scheduled ", t.id))
                && header.ends_with(", 0 polls]:"),
            "{text}"
        );
        assert_eq!(
            text.lines().skip(1).collect::<Vec<_>>(),
            [
                "  (not polled yet)".to_owned(),
                format!("  spawned at {}:{spawned_line}:{}", file!(), at.column),
            ],
            "{text}"
        );
        // Waiting for its first poll, not for a waker.
        assert!(
            !async_stack::unwakeable().iter().any(|u| u.id == t.id),
            "{before}"
        );
        let json = before.to_json();
        assert_eq!(common::dump_schema_errors(&json), Vec::<String>::new());
        let read_back = TaskDump::from_json(&json).expect("the JSON reads back");
        assert_eq!(read_back.task(t.id), Some(*t));

        let polled = settled(&h.id(), 1).await;
        assert_eq!(polled.id, t.id);
        assert_eq!(polled.name.as_deref(), Some("not yet polled"));
        assert_eq!(polled.spawned_at.as_ref(), Some(at));
        assert_eq!(roots(&polled), [("left".into(), LEFT_AWAIT)]);
        tx.send(2).unwrap();
        assert_eq!(h.await.unwrap(), 2);
        assert!(dump().task(t.id).is_none());
    });
}

/// A task spawned through the helper and never polled leaves dumps when
/// tokio drops it: aborted, or with its runtime.
#[test]
fn a_task_dropped_before_its_first_poll_leaves_the_dump() {
    let named = |name: &str| {
        dump()
            .tasks
            .iter()
            .filter(|t| t.name.as_deref() == Some(name))
            .count()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let h = async_stack::tokio::spawn_named("aborted unpolled", async {});
        assert_eq!(named("aborted unpolled"), 1);
        h.abort();
        let err = h.await.expect_err("aborted before it ran");
        assert!(err.is_cancelled());
        assert_eq!(named("aborted unpolled"), 0);
    });
    rt.block_on(async {
        drop(async_stack::tokio::spawn_named(
            "dropped with its runtime",
            async {},
        ));
    });
    assert_eq!(named("dropped with its runtime"), 1);
    drop(rt);
    assert_eq!(named("dropped with its runtime"), 0);
}

/// Tasks of a `LocalSet` (`spawn_local`) have tokio ids too.
#[test]
fn local_set() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let (ltx, lrx) = oneshot::channel();
        let (rtx, rrx) = oneshot::channel();
        let h = tokio::task::spawn_local(async move { tokio::join!(left(lrx), right(rrx)) });
        let t = settled(&h.id(), 2).await;
        assert_eq!(
            roots(&t),
            [("left".into(), LEFT_AWAIT), ("right".into(), RIGHT_AWAIT)]
        );
        assert!(t.to_string().starts_with(&header(&t, &h.id())));
        ltx.send(1).unwrap();
        rtx.send(2).unwrap();
        assert_eq!(h.await.unwrap(), (1, 2));
    });
}

/// Outside a tokio task nothing changes: roots polled by `block_on`'s own
/// future, or by another executor, are tasks of their own.
#[test]
fn outside_tokio_tasks_each_root_is_a_task() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (ltx, lrx) = oneshot::channel();
    let (rtx, rrx) = oneshot::channel();
    let mut pair = Box::pin(async move { tokio::join!(lone(lrx), lone(rrx)) });
    rt.block_on(async {
        assert!(futures::poll!(pair.as_mut()).is_pending());
        let d = dump();
        let ours: Vec<&TaskInfo> = d
            .tasks
            .iter()
            // Other tests run beside this one: look only at roots parked
            // in `lone`, assuming nothing of the others' frames.
            .filter(|t| {
                t.frames.iter().any(|f| {
                    f.depth == 0 && f.awaiting_at.as_ref().is_some_and(|a| a.line == LONE_AWAIT)
                })
            })
            .collect();
        assert_eq!(ours.len(), 2, "{d}");
        for t in ours {
            assert_eq!(t.tokio_id, None);
            assert_eq!(t.branches, [t.id]);
            assert!(!t.to_string().contains("tokio task"));
        }
    });
    ltx.send(1).unwrap();
    rtx.send(2).unwrap();
    assert_eq!(futures::executor::block_on(pair), (1, 2));
}

/// Set once the watchdog has reported [`spinner`]'s task.
static REPORTED: AtomicBool = AtomicBool::new(false);

#[traced_async]
async fn spinner() {
    // Blocks its thread inside one poll until the watchdog reported it
    // (its thread may get no turn for a while on a loaded machine), then
    // 400 ms more, in which a second report of the same stall would come.
    common::wait_for("a stall report", || REPORTED.load(Ordering::Acquire));
    std::thread::sleep(Duration::from_millis(400));
}

/// The stall watchdog reports a tokio task once, as its one entry: the
/// root that blocks and the one parked beside it, under the tokio id.
#[test]
fn the_stall_watchdog_reports_the_tokio_task_once() {
    use async_stack::stall::{StallKind, Watchdog};
    use std::sync::{Arc, Mutex};

    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let watchdog = Watchdog::builder()
        .running_threshold(Duration::from_millis(50))
        .interval(Duration::from_millis(5))
        .on_stall(move |r| {
            sink.lock().unwrap().push(r.clone());
            if r.task
                .frames
                .iter()
                .any(|f| f.function.ends_with("::spinner"))
            {
                REPORTED.store(true, Ordering::Release);
            }
        })
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (tx, rx) = oneshot::channel();
    let tokio_id = rt.block_on(async {
        let h = tokio::spawn(async move {
            tokio::join!(left(rx), async move {
                spinner().await;
                tx.send(1).unwrap();
            })
        });
        let id = h.id();
        h.await.unwrap();
        id
    });
    watchdog.stop();
    let reports = reports.lock().unwrap();
    let ours: Vec<_> = reports
        .iter()
        .filter(|r| r.task.tokio_id.map(|n| n.to_string()) == Some(tokio_id.to_string()))
        .collect();
    assert_eq!(ours.len(), 1, "{reports:?}");
    let r = ours[0];
    assert_eq!(r.kind, StallKind::Running);
    assert_eq!(r.task.state, TaskState::Running);
    assert_eq!(r.task.branches.len(), 2);
    let names: Vec<&str> = r
        .task
        .frames
        .iter()
        .map(|f| f.function.rsplit("::").next().unwrap())
        .collect();
    assert_eq!(names, ["left", "spinner"]);
    let text = r.to_string();
    let head = format!(
        "async-stack: stall: task {} (tokio task {tokio_id}) has been running without yielding for ",
        r.task.id
    );
    assert!(text.starts_with(&head), "{text}");
}

/// Tells `ready`, then never ends.
#[traced_async]
async fn tell_then_park(ready: std::sync::mpsc::Sender<()>) {
    ready.send(()).unwrap();
    std::future::pending::<()>().await
}

#[traced_async]
async fn scratch() {
    std::future::pending::<()>().await
}

/// A streamed dump that shows a helper task not polled yet does not show
/// it a second time, under its tokio task, when the task's first poll
/// (two roots, in a `join!`) runs while the dump is under way: the
/// runtime is held until the dump reaches the task, then let go.
#[test]
fn a_dump_racing_a_first_poll_shows_the_task_once() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let (setup_tx, setup_rx) = std::sync::mpsc::channel::<u64>();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let runtime = std::thread::spawn(move || {
        rt.block_on(async move {
            let other = ready_tx.clone();
            let h = async_stack::tokio::spawn_named("racing", async move {
                tokio::join!(tell_then_park(ready_tx), tell_then_park(other));
            });
            // Records freed above the task's, for its second root.
            for _ in 0..3 {
                let mut f = Box::pin(scratch());
                let _ = futures::poll!(f.as_mut());
            }
            setup_tx.send(h.id().to_string().parse().unwrap()).unwrap();
            go_rx.recv().unwrap();
            let _ = done_rx.await;
        });
    });
    let tokio_id = setup_rx.recv().unwrap();
    let mut released = false;
    let mut shown = Vec::new();
    live_tasks().for_each(|t| {
        if t.name.as_deref() == Some("racing") || t.tokio_id == Some(tokio_id) {
            shown.push(t.to_string());
        }
        if !released && t.name.as_deref() == Some("racing") {
            released = true;
            go_tx.send(()).unwrap();
            ready_rx.recv().unwrap();
            ready_rx.recv().unwrap();
        }
    });
    assert!(released, "the dump met the task");
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert!(shown[0].contains("(not polled yet)"), "{shown:#?}");
    // A dump taken now shows it once, polled, with both roots.
    let now = dump();
    let entries = now
        .tasks
        .iter()
        .filter(|t| t.tokio_id == Some(tokio_id))
        .collect::<Vec<_>>();
    assert_eq!(entries.len(), 1, "{now}");
    assert_eq!(entries[0].branches.len(), 2, "{now}");
    done_tx.send(()).unwrap();
    runtime.join().unwrap();
}
