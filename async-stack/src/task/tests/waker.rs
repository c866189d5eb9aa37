//! The task's waker driven through `Traced`: wakes reach the executor
//! whatever it does with the waker, and references never outlive the
//! record.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use crate::task::record::layout::{TaskRecord, refs};
use crate::task::registry;
use crate::task::traced::TracedExt;

/// An executor's waker that counts its wakes.
#[derive(Debug, Default)]
struct Executor(AtomicUsize);

impl Wake for Executor {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Executor {
    fn wakes(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// A task root, polled once.
struct Task {
    root: Pin<Box<dyn Future<Output = ()> + Send>>,
    index: u32,
}

impl Task {
    fn record(&self) -> &'static TaskRecord {
        registry::record(self.index).unwrap()
    }
}

/// A task root polled once by `executor`, and a clone of the waker it
/// was polled with.
fn polled_task(executor: &Arc<Executor>) -> (Task, Waker) {
    let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
    let id = Arc::new(AtomicU64::new(0));
    let (keep, task_id) = (kept.clone(), id.clone());
    let mut root: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(
        std::future::poll_fn(move |cx| {
            *keep.lock().unwrap() = Some(cx.waker().clone());
            task_id.store(
                crate::task::record::layout::current_task_id().unwrap(),
                Ordering::Relaxed,
            );
            Poll::Pending
        })
        .traced(),
    );
    let waker = Waker::from(executor.clone());
    assert!(
        root.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    let id = id.load(Ordering::Relaxed);
    let index = (0..registry::record_count() as u32)
        .find(|&i| registry::record(i).is_some_and(|r| r.id.load(Ordering::Relaxed) == id))
        .expect("a live task has a record");
    let kept = kept.lock().unwrap().take().unwrap();
    (Task { root, index }, kept)
}

/// Issue 20: `refs` wrapped after 2^32 - 1 forgotten clones (safe code,
/// about 30 s), and the record went to the next task while a waker of
/// the old one lived: waking it woke the next task's executor. Past the
/// limit the count now sticks, and the record is never reused.
#[test]
fn a_waker_count_past_its_limit_never_lets_the_record_be_reused() {
    // A fresh thread: its cache of free records hands back the record
    // it freed last, so a recycled record would go to the next task.
    std::thread::spawn(|| {
        let (a, b) = (Arc::new(Executor::default()), Arc::new(Executor::default()));
        let (task, w) = polled_task(&a);
        let r = task.record();
        assert_eq!(r.refs.load(Ordering::Relaxed), 2, "the task's and `w`'s");
        // As if 2^32 - 4 clones had been forgotten, then two more.
        r.refs.fetch_add(u32::MAX - 3, Ordering::Relaxed);
        std::mem::forget(w.clone());
        std::mem::forget(w.clone());
        let w2 = w.clone();
        let index = task.index;
        drop(task);

        let (later, _) = polled_task(&b);
        assert_ne!(later.index, index, "the record was reused");
        w.wake_by_ref();
        w2.wake();
        assert_eq!((a.wakes(), b.wakes()), (2, 0));
        drop(w);
        assert_eq!(a.wakes(), 2);
        drop(later);
    })
    .join()
    .unwrap();
}

/// Below the limit the count is exact: a count that reaches
/// `refs::MAX` comes back down, and the last reference recycles the
/// record (its executor's waker is dropped, and the next task of the
/// thread gets the record).
#[test]
fn a_waker_count_up_to_its_limit_is_exact() {
    std::thread::spawn(|| {
        let a = Arc::new(Executor::default());
        let (task, w) = polled_task(&a);
        let r = task.record();
        // As if `refs::MAX - 3` clones had been forgotten.
        r.refs.fetch_add(refs::MAX - 3, Ordering::Relaxed);
        let w2 = w.clone();
        assert_eq!(r.refs.load(Ordering::Relaxed), refs::MAX);
        w2.wake();
        assert_eq!(r.refs.load(Ordering::Relaxed), refs::MAX - 1);
        // As if the forgotten clones had been dropped after all.
        r.refs.fetch_sub(refs::MAX - 3, Ordering::Relaxed);
        let index = task.index;
        drop(task);
        assert_eq!(Arc::strong_count(&a), 2, "`w` keeps the executor's waker");
        w.wake();
        assert_eq!(a.wakes(), 2);
        assert_eq!(Arc::strong_count(&a), 1, "the last waker released it");
        let (later, _) = polled_task(&Arc::new(Executor::default()));
        assert_eq!(later.index, index, "the record was recycled");
    })
    .join()
    .unwrap();
}

/// A fallback waker (the executor changed its waker) takes its
/// reference the same way: a fallback made at the limit makes the
/// count stick.
#[test]
fn a_fallback_past_the_limit_never_lets_the_record_be_reused() {
    std::thread::spawn(|| {
        let (a, b) = (Arc::new(Executor::default()), Arc::new(Executor::default()));
        let (mut task, w) = polled_task(&a);
        let r = task.record();
        // As if 2^32 - 3 clones had been forgotten: `u32::MAX`.
        r.refs.fetch_add(u32::MAX - 2, Ordering::Relaxed);
        // The executor changes its waker: the task makes a fallback,
        // which takes a reference.
        let other = Waker::from(b.clone());
        assert!(
            task.root
                .as_mut()
                .poll(&mut Context::from_waker(&other))
                .is_pending()
        );
        std::mem::forget(w.clone());
        std::mem::forget(w.clone());
        let index = task.index;
        // The fallback's reference and the task's go: were the count
        // wrapped, `w`'s would be the last.
        drop(task);
        let (later, _) = polled_task(&Arc::new(Executor::default()));
        assert_ne!(later.index, index, "the record was reused");
        w.wake();
        assert_eq!((a.wakes(), b.wakes()), (1, 0));
    })
    .join()
    .unwrap();
}
