//! Loom models of the task's waker: references racing the end of the
//! task, and wakes forwarded to the executor's waker.

use std::sync::Arc;
use std::sync::atomic::Ordering as StdOrdering;
use std::task::{Wake, Waker};

use crate::shim::Ordering;
use crate::task::loom_models::{ROOT, Task, task, task_with_boxed_waker};
use crate::task::record::layout::refs;
use crate::task::{end, place, registry};

/// The task ends on one thread while the last clone of its waker is
/// dropped on another: the record is recycled exactly once, after both.
#[test]
fn the_last_reference_recycles_the_record_once() {
    loom::model(|| {
        let t = task(&ROOT, 1);
        let clone = (*crate::task::waker::lend(t.index)).clone();
        let dropper = loom::thread::spawn(move || drop(clone));
        end::end_task(place::root(t.key));
        dropper.join().unwrap();
        assert_eq!(registry::alloc_record(), Some(t.index), "recycled");
        assert_ne!(registry::alloc_record(), Some(t.index), "only once");
    });
}

/// An executor's waker kept boxed (its vtable found the table full) is
/// woken from another thread while the task ends: the wake reaches it,
/// and the last reference drops it, once.
#[test]
fn a_boxed_executor_waker_is_woken_and_dropped_once() {
    loom::model(|| {
        let executor = Arc::new(Executor::default());
        let t = task_with_boxed_waker(&ROOT, 1, Waker::from(executor.clone()));
        no_clock(t);
        let clone = (*crate::task::waker::lend(t.index)).clone();
        let waker = loom::thread::spawn(move || clone.wake());
        end::end_task(place::root(t.key));
        waker.join().unwrap();
        assert_eq!(executor.0.load(StdOrdering::Relaxed), 1, "woken once");
        assert_eq!(Arc::strong_count(&executor), 1, "dropped");
        assert_eq!(registry::alloc_record(), Some(t.index), "recycled");
    });
}

/// A count at its limit: a clone that passes it on one thread, while
/// the task ends on another. Whatever the order, the record is never
/// recycled (the count stays exact and above 0, or sticks), and the
/// wake reaches the executor.
#[test]
fn a_count_past_its_limit_never_recycles_the_record() {
    loom::model(|| {
        let t = task(&ROOT, 1);
        no_clock(t);
        let w = (*crate::task::waker::lend(t.index)).clone();
        // As if `refs::MAX - 2` clones had been forgotten.
        t.record.refs.fetch_add(refs::MAX - 2, Ordering::Relaxed);
        let cloner = loom::thread::spawn(move || {
            // The clone is what is tested: it passes the limit.
            #[allow(clippy::waker_clone_wake)]
            w.clone().wake();
            drop(w);
        });
        end::end_task(place::root(t.key));
        cloner.join().unwrap();
        assert!(t.record.refs.load(Ordering::Relaxed) >= refs::MAX - 2);
        assert_ne!(registry::alloc_record(), Some(t.index), "recycled");
    });
}

/// Counts a wake of `t`'s task from outside its polls, so that the
/// wakes of a model are not the first since a poll, which would read
/// the clock (and start its ticker thread, outside the model).
fn no_clock(t: Task) {
    t.record.wakes.store(1, Ordering::Relaxed);
}

/// An executor's waker that counts its wakes.
#[derive(Debug, Default)]
struct Executor(std::sync::atomic::AtomicUsize);

impl Wake for Executor {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, StdOrdering::Relaxed);
    }
}
