//! Odd executors and odd uses of wakers, as a user sees them: every wake
//! reaches the executor that polled the task, whatever executors the
//! process runs, and a waker that outlives its task never wakes another.
//!
//! The executors here are hand-written: each has a waker vtable of its own
//! (a distinct `RawWakerVTable` address, as two runtimes or two builds of
//! one runtime have), and counts the wakes, clones and drops of its
//! wakers. The library interns a bounded number of vtables; these tests
//! run hundreds, so most of them find the table full.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use async_stack::TracedExt;

/// More executors than the library's table of vtables holds (64).
const EXECUTORS: usize = 200;

/// An executor: its own waker vtable, and counts of what its wakers did.
#[derive(Debug)]
struct Executor {
    vtable: &'static RawWakerVTable,
    wakes: AtomicUsize,
    /// Wakers of this executor alive: the one it made, plus clones, minus
    /// drops (a wake by value drops too).
    live: AtomicUsize,
}

// The functions of every executor's vtable; `data` is the `&'static
// Executor` the waker belongs to.
fn executor(data: *const ()) -> &'static Executor {
    // SAFETY: every waker made here has a leaked `Executor` as its data.
    unsafe { &*data.cast::<Executor>() }
}
fn clone(data: *const ()) -> RawWaker {
    let e = executor(data);
    e.live.fetch_add(1, Ordering::Relaxed);
    RawWaker::new(data, e.vtable)
}
fn wake(data: *const ()) {
    wake_by_ref(data);
    drop(data);
}
fn wake_by_ref(data: *const ()) {
    executor(data).wakes.fetch_add(1, Ordering::Relaxed);
}
fn drop(data: *const ()) {
    executor(data).live.fetch_sub(1, Ordering::Relaxed);
}

impl Executor {
    /// A new executor with a vtable of its own (leaked, so `'static` and at
    /// an address no other executor has).
    fn new() -> &'static Executor {
        let vtable = Box::leak(Box::new(RawWakerVTable::new(
            clone,
            wake,
            wake_by_ref,
            drop,
        )));
        Box::leak(Box::new(Executor {
            vtable,
            wakes: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
        }))
    }

    /// A waker of this executor.
    fn waker(&'static self) -> Waker {
        self.live.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the functions of `self.vtable` take a `&'static Executor`
        // as data, which `self` is; they are thread-safe (atomics only).
        unsafe { Waker::new(std::ptr::from_ref(self).cast(), self.vtable) }
    }

    fn wakes(&self) -> usize {
        self.wakes.load(Ordering::Relaxed)
    }

    fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }
}

type Kept = Arc<Mutex<Vec<Waker>>>;

/// A task root that keeps a clone of its waker on every poll, and never
/// completes.
fn keeping_its_wakers(kept: Kept) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(
        std::future::poll_fn(move |cx| {
            kept.lock().unwrap().push(cx.waker().clone());
            Poll::Pending
        })
        .traced(),
    )
}

/// Polls `task` once with a waker of `e`.
fn poll_with(task: &mut Pin<Box<dyn Future<Output = ()> + Send>>, e: &'static Executor) {
    let waker = e.waker();
    let mut cx = Context::from_waker(&waker);
    assert!(task.as_mut().poll(&mut cx).is_pending());
}

/// The indices of the executors whose wake count is not `expected`, with
/// their counts.
fn miscounted(executors: &[&'static Executor], expected: usize) -> Vec<(usize, usize)> {
    executors
        .iter()
        .enumerate()
        .filter(|(_, e)| e.wakes() != expected)
        .map(|(i, e)| (i, e.wakes()))
        .collect()
}

/// The repro: 200 executors, each with its own vtable, each polls
/// a task twice; the task keeps a clone of its waker each time. All 400
/// clones are woken (from another thread): each executor gets exactly its
/// two wakes, the first poll's included. Once the tasks are dropped, no
/// executor waker is left alive.
#[test]
fn every_wake_reaches_its_executor_with_hundreds_of_waker_vtables() {
    let executors: Vec<_> = (0..EXECUTORS).map(|_| Executor::new()).collect();
    let kept = Kept::default();
    let mut tasks: Vec<_> = executors
        .iter()
        .map(|&e| {
            let mut task = keeping_its_wakers(kept.clone());
            poll_with(&mut task, e);
            poll_with(&mut task, e);
            task
        })
        .collect();
    let wakers = std::mem::take(&mut *kept.lock().unwrap());
    assert_eq!(wakers.len(), 2 * EXECUTORS);
    std::thread::spawn(move || wakers.into_iter().for_each(Waker::wake))
        .join()
        .unwrap();
    assert_eq!(miscounted(&executors, 2), [], "(executor, wakes) not 2");

    tasks.clear();
    let alive: Vec<_> = executors.iter().map(|e| e.live()).collect();
    assert_eq!(alive, [0; EXECUTORS], "executor wakers left alive");
}

/// The same with an executor that passes another waker (of a second
/// executor, with its own vtable) to the task's second poll: the first
/// poll's clone wakes the first executor, the second poll's the second.
#[test]
fn a_waker_changed_between_polls_reaches_each_executor_with_hundreds_of_vtables() {
    let first: Vec<_> = (0..EXECUTORS).map(|_| Executor::new()).collect();
    let second: Vec<_> = (0..EXECUTORS).map(|_| Executor::new()).collect();
    let kept = Kept::default();
    let mut tasks: Vec<_> = first
        .iter()
        .zip(&second)
        .map(|(&a, &b)| {
            let mut task = keeping_its_wakers(kept.clone());
            poll_with(&mut task, a);
            poll_with(&mut task, b);
            task
        })
        .collect();
    let wakers = std::mem::take(&mut *kept.lock().unwrap());
    for w in &wakers {
        w.wake_by_ref();
    }
    assert_eq!(miscounted(&first, 1), [], "(first executor, wakes) not 1");
    assert_eq!(miscounted(&second, 1), [], "(second executor, wakes) not 1");

    std::mem::drop(wakers);
    tasks.clear();
    for e in first.iter().chain(&second) {
        assert_eq!(e.live(), 0, "an executor waker left alive");
    }
}

/// A waker that outlives its task wakes that task's executor, never the
/// executor of a task that came later, and keeps the executor's waker alive
/// until it is dropped: with 10,000 clones, the last one dropped releases
/// it, not one before.
#[test]
fn a_waker_outliving_its_task_never_wakes_a_later_task() {
    // A fresh thread, whose cache of free records hands back the one it
    // freed last: were the record recycled early, the next task would get
    // it.
    std::thread::spawn(|| {
        let (old, new) = (Executor::new(), Executor::new());
        let kept = Kept::default();
        let mut task = keeping_its_wakers(kept.clone());
        poll_with(&mut task, old);
        let first = kept.lock().unwrap().pop().unwrap();
        let mut clones: Vec<_> = (0..10_000).map(|_| first.clone()).collect();
        std::mem::drop(first);
        std::mem::drop(task);
        assert_eq!(
            old.live(),
            1,
            "the task's record keeps the executor's waker"
        );

        let mut later = keeping_its_wakers(Kept::default());
        poll_with(&mut later, new);
        for w in &clones {
            w.wake_by_ref();
        }
        assert_eq!((old.wakes(), new.wakes()), (10_000, 0));

        let last = clones.pop().unwrap();
        clones.clear();
        assert_eq!(old.live(), 1, "one waker is left");
        last.wake();
        assert_eq!((old.wakes(), new.wakes()), (10_001, 0));
        assert_eq!(old.live(), 0, "released with the last waker");
        std::mem::drop(later);
        assert_eq!(new.live(), 0);
    })
    .join()
    .unwrap();
}
