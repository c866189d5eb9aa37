//! The life of task roots (wakes counted, records recycled and retired,
//! roots polled as children) as a dump shows it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::read::dump::dump;
use crate::shim::Ordering;
use crate::task::TaskState;
use crate::task::place::INCARNATION_LIMIT;
use crate::task::registry;
use crate::task::stack::foreign;
use crate::task::traced::{Traced, TracedExt};

type Child = Arc<Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>>;

/// The record index of live task `id`.
fn index_of(id: u64) -> u32 {
    (0..registry::record_count() as u32)
        .find(|&i| registry::record(i).is_some_and(|r| r.id.load(Ordering::Relaxed) == id))
        .expect("a live task has a record")
}

/// A task root named `name` that polls `child` (while it is there) on
/// its first poll and completes on its second.
fn root_polling(name: &'static str, child: Child) -> Traced<impl Future<Output = ()> + Send> {
    let mut first = true;
    std::future::poll_fn(move |cx| {
        if !std::mem::take(&mut first) {
            return Poll::Ready(());
        }
        if let Some(f) = child.lock().unwrap().as_mut() {
            assert!(f.as_mut().poll(cx).is_pending());
        }
        Poll::Pending
    })
    .traced_named(name)
}

fn names(id: u64) -> Vec<String> {
    let d = dump();
    let t = d.task(id).expect("the task is live");
    assert_eq!(t.hidden_frames, 0);
    t.frames.iter().map(|f| f.function.to_string()).collect()
}

/// The record keeps one count of wakes: those from outside the task's
/// polls as they happen, those from inside a poll when it ends. A poll
/// that woke its own task ends scheduled, a poll without wakes ends
/// idle, and a wake from outside makes an idle task scheduled.
#[test]
fn wakes_from_inside_and_outside_polls_are_counted_once_each() {
    let mut cx = Context::from_waker(Waker::noop());
    let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
    let keep = kept.clone();
    let mut polls = 0;
    let mut task = Box::pin(
        std::future::poll_fn(move |cx| {
            polls += 1;
            if polls == 1 {
                cx.waker().wake_by_ref();
                cx.waker().wake_by_ref();
            }
            *keep.lock().unwrap() = Some(cx.waker().clone());
            Poll::<()>::Pending
        })
        .traced_named("counts-its-wakes"),
    );
    let seen = |id| {
        let d = dump();
        let t = d.task(id).expect("the task is live");
        (t.state, t.wakes, t.polls)
    };
    assert!(task.as_mut().poll(&mut cx).is_pending());
    let id = task.task_id().unwrap();
    assert_eq!(seen(id), (TaskState::Scheduled, 2, 1));
    assert!(task.as_mut().poll(&mut cx).is_pending());
    assert_eq!(seen(id), (TaskState::Idle, 2, 2));
    let waker = kept.lock().unwrap().take().unwrap();
    std::thread::spawn(move || waker.wake()).join().unwrap();
    assert_eq!(seen(id), (TaskState::Scheduled, 3, 2));
    assert!(task.as_mut().poll(&mut cx).is_pending());
    assert_eq!(seen(id), (TaskState::Idle, 3, 3));
}

/// A frame that outlives its task keeps the incarnation it was placed
/// in, and a record is retired once its incarnations are used up
/// (`INCARNATION_LIMIT`, 16 in these tests), so the frame can never
/// give back a slot of a later task in the same record: the wrap of the
/// issue's 16-bit generations cannot happen.
#[test]
fn a_frame_outliving_its_task_never_touches_a_later_task_of_its_record() {
    // A fresh thread: its cache of free records hands back the record
    // it freed last, so the tasks below reuse one record.
    std::thread::spawn(|| {
        let mut cx = Context::from_waker(Waker::noop());
        let survivor: Child = Arc::new(Mutex::new(Some(Box::pin(
            std::future::pending::<()>().traced_named("survivor"),
        ))));
        let mut a = Box::pin(root_polling("task-a", survivor.clone()));
        assert!(a.as_mut().poll(&mut cx).is_pending());
        let id_a = a.task_id().unwrap();
        let index = index_of(id_a);
        let record = registry::record(index).unwrap();
        let first_inc = foreign::incarnation(record.foreign.load(Ordering::Relaxed));
        assert_eq!(names(id_a), ["task-a", "survivor"]);
        // Task A ends; its child lives on outside it.
        assert!(a.as_mut().poll(&mut cx).is_ready());
        drop(a);

        // Task B takes the same record and the same slot for its child.
        let b_child: Child = Arc::new(Mutex::new(Some(Box::pin(
            std::future::pending::<()>().traced_named("b-child"),
        ))));
        let mut b = Box::pin(root_polling("task-b", b_child.clone()));
        assert!(b.as_mut().poll(&mut cx).is_pending());
        let id_b = b.task_id().unwrap();
        assert_eq!(
            index_of(id_b),
            index,
            "the thread's cache gives the record back"
        );
        assert_eq!(names(id_b), ["task-b", "b-child"]);

        // The survivor is dropped on another thread: it retires its old
        // place, which belongs to an ended incarnation.
        let s = survivor.clone();
        std::thread::spawn(move || drop(s.lock().unwrap().take()))
            .join()
            .unwrap();
        assert_eq!(
            names(id_b),
            ["task-b", "b-child"],
            "task B's child keeps its slot"
        );
        assert!(b.as_mut().poll(&mut cx).is_ready());
        drop(b);
        drop(b_child);

        // Run tasks until the record stops coming back: it serves each
        // incarnation from `first_inc` to the limit once, then retires.
        let mut served = 2; // tasks A and B
        loop {
            let mut t = Box::pin(root_polling("filler", Arc::new(Mutex::new(None))));
            assert!(t.as_mut().poll(&mut cx).is_pending());
            let here = index_of(t.task_id().unwrap());
            assert!(t.as_mut().poll(&mut cx).is_ready());
            if here != index {
                break;
            }
            served += 1;
            assert!(
                served < 2 * INCARNATION_LIMIT,
                "the record is never retired"
            );
        }
        assert_eq!(served, INCARNATION_LIMIT - first_inc);
        let last = foreign::incarnation(record.foreign.load(Ordering::Relaxed));
        assert_eq!(last, INCARNATION_LIMIT);
        assert_eq!(record.id.load(Ordering::Relaxed), 0);
        // Never handed out again.
        for _ in 0..2 * registry::record_count().min(1000) {
            let mut t = Box::pin(root_polling("after", Arc::new(Mutex::new(None))));
            assert!(t.as_mut().poll(&mut cx).is_pending());
            assert_ne!(index_of(t.task_id().unwrap()), index);
        }
    })
    .join()
    .unwrap();
}

/// The roots of one tokio task are its entry's branches in the order of
/// their first poll, also when the tokio task moved between threads.
/// Threads take task ids in blocks, so a root first polled later, on a
/// thread whose block is older, would get a smaller id; roots filed
/// under a tokio task take theirs alone from the registry's counter
/// instead, and their ids order them. Staged: thread X takes a block,
/// then thread Y; the tokio task first polls root `a` on Y, then moves to
/// X and first polls root `b` there.
#[cfg(feature = "tokio")]
#[test]
fn the_roots_of_a_tokio_task_are_in_first_poll_order_across_threads() {
    use std::sync::mpsc;

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    // A plain root polled on the calling thread takes the thread's block
    // of ids (if it has none yet); kept until the end.
    let take_block = || {
        let mut t = Box::pin(std::future::pending::<()>().traced_named("order-block"));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(t.as_mut().poll(&mut cx).is_pending());
        t
    };
    std::thread::scope(|scope| {
        let (x_ready, x_has_block) = mpsc::channel();
        let (x_go, x_wait) = mpsc::channel::<()>();
        let rt = &rt;
        let x = scope.spawn(move || {
            let _block = take_block();
            x_ready.send(()).unwrap();
            x_wait.recv().unwrap();
            // The task moves here: `b` is first polled on this thread.
            rt.block_on(async {
                go_tx.send(()).unwrap();
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            });
        });
        x_has_block.recv().unwrap();
        let y = scope.spawn(move || {
            let _block = take_block();
            let h = rt.spawn(async move {
                let a = std::future::pending::<()>().traced_named("order-a");
                let b = async move {
                    let _ = go_rx.await;
                    std::future::pending::<()>().traced_named("order-b").await
                };
                futures::join!(a, b)
            });
            // The task's first poll, here: `a` is first polled on Y.
            rt.block_on(tokio::task::yield_now());
            x_go.send(()).unwrap();
            h
        });
        let h = y.join().unwrap();
        x.join().unwrap();
        let tokio_id: u64 = h.id().to_string().parse().unwrap();
        let t = dump().tokio_task(tokio_id).cloned().expect("the entry");
        let [a, b] = t.branches[..] else {
            panic!("two roots: {t}")
        };
        assert!(a < b, "ids in first-poll order across threads: {t}");
        assert_eq!((t.id, t.name.as_deref()), (a, Some("order-a")));
        let functions: Vec<&str> = t.frames.iter().map(|f| &*f.function).collect();
        assert_eq!(functions, ["order-a", "order-b"]);
        h.abort();
    });
    rt.block_on(tokio::task::yield_now());
}

/// A streamed dump keeps at most its batch of tokio roots aside: with
/// more, it takes further passes, one per share of the tokio ids, and
/// still visits each tokio task once, whole, as a whole dump does.
#[cfg(feature = "tokio")]
#[test]
fn tokio_tasks_past_the_batch_are_read_in_shares_each_once_and_whole() {
    use super::collect::for_each_entry;

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let handles: Vec<_> = (0..7)
            .map(|_| {
                tokio::spawn(async {
                    let a = std::future::pending::<()>().traced_named("share-a");
                    let b = std::future::pending::<()>().traced_named("share-b");
                    futures::join!(a, b)
                })
            })
            .collect();
        tokio::task::yield_now().await;
        let ours: Vec<u64> = handles
            .iter()
            .map(|h| h.id().to_string().parse().unwrap())
            .collect();
        let whole = |batch| {
            let mut seen = Vec::new();
            for_each_entry(
                |_| true,
                |t| {
                    if t.tokio_id.is_some_and(|id| ours.contains(&id)) {
                        seen.push((t.tokio_id.unwrap(), t.branches.len(), t.frames.len()));
                    }
                },
                batch,
            );
            seen.sort_unstable();
            seen
        };
        let all = whole(usize::MAX);
        assert_eq!(all.len(), 7);
        assert!(
            all.iter()
                .all(|&(_, branches, frames)| (branches, frames) == (2, 2))
        );
        // 14 roots (and any other test's), 3 at a time.
        assert_eq!(whole(3), all);
        assert_eq!(whole(1), all);
        for h in handles {
            h.abort();
        }
    });
}
