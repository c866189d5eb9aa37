//! The waker a task root hands to the future it polls, so that a wake marks
//! the task *scheduled* before the executor's own waker runs.
//!
//! One [`RootShared`] is allocated per task (at its first poll). It holds
//! the task's registration and the executor's waker, and is itself the
//! waker handed down: [`RootShared::waker_ref`] lends it for one poll
//! without touching the reference count (a clone takes a reference). So a
//! task root keeps a single pointer in its future, and in the steady state
//! a root poll compares two words and passes `&Waker` through: no
//! allocation, no reference count traffic. It is rebuilt only when the
//! executor passes a waker that would not wake the same task
//! (`Waker::will_wake`), which executors such as tokio never do.
//!
//! The waker is a hand-written [`RawWakerVTable`] over `Arc<RootShared>`
//! rather than `futures`' `ArcWake`, so that a wake is one call before the
//! executor's: in a task that yields on every poll, the wake is a good part
//! of what a task root costs.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;
use std::task::{RawWaker, RawWakerVTable, Waker};

use super::registry::Registration;
use crate::sync::Ordering;

/// A task root's shared state: its registration, and the executor's waker
/// that waking it forwards to.
pub(crate) struct RootShared {
    pub(crate) reg: Registration,
    executor: Waker,
}

impl RootShared {
    pub(crate) fn new(reg: Registration, executor: &Waker) -> Arc<Self> {
        Arc::new(RootShared {
            reg,
            executor: executor.clone(),
        })
    }

    /// Whether this state's executor waker still wakes the same task as
    /// `executor`.
    #[inline]
    pub(crate) fn wakes_like(&self, executor: &Waker) -> bool {
        self.executor.will_wake(executor)
    }

    /// The task's waker, lent for as long as `self` is borrowed.
    #[inline(always)]
    pub(crate) fn waker_ref(self: &Arc<Self>) -> LentWaker<'_> {
        let data = Arc::as_ptr(self).cast::<()>();
        // SAFETY: `data` comes from an `Arc<RootShared>` that outlives the
        // returned value (it borrows `self`), which is what `VTABLE`'s
        // functions require. The waker is never dropped (`ManuallyDrop`),
        // so it gives back no reference it did not take; a clone takes its
        // own.
        let waker = unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) };
        LentWaker {
            waker: ManuallyDrop::new(waker),
            _shared: PhantomData,
        }
    }

    /// A wake from inside the task's own poll (a yield) is counted by the
    /// polling thread without atomics: the task ends the poll scheduled.
    /// Any other wake is counted in the task slot (see
    /// [`TaskSlot::wake`](super::TaskSlot::wake)). Then the executor's
    /// waker runs.
    #[inline(always)]
    fn wake(&self) {
        let reg = &self.reg;
        let own = crate::record::current::with(|a| {
            // The slot holds the id of the task being polled.
            let own = std::ptr::eq(a.task.get(), reg.slot)
                && reg.slot.id.load(Ordering::Relaxed) == reg.id;
            if own {
                a.self_wakes.set(a.self_wakes.get().wrapping_add(1));
            }
            own
        });
        if own != Some(true) {
            self.wake_from_outside();
        }
        self.executor.wake_by_ref();
    }

    #[inline(never)]
    fn wake_from_outside(&self) {
        let reg = &self.reg;
        reg.slot.wake(reg.generation, crate::record::clock::now_ms);
    }
}

/// A task's waker lent for one poll (see [`RootShared::waker_ref`]).
pub(crate) struct LentWaker<'a> {
    waker: ManuallyDrop<Waker>,
    _shared: PhantomData<&'a Arc<RootShared>>,
}

impl Deref for LentWaker<'_> {
    type Target = Waker;

    #[inline(always)]
    fn deref(&self) -> &Waker {
        &self.waker
    }
}

/// One `static`, so that every waker of a task has the same vtable address
/// and `Waker::will_wake` recognises clones.
static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop);

// Each function below receives a `data` pointer that came from
// `Arc::<RootShared>::as_ptr` (a lent waker) or from `clone` (a waker
// owning one strong reference), for an `Arc` that is alive while the waker
// is.

unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: `data` points into a live `Arc<RootShared>` (see above); the
    // new waker owns the reference taken here.
    unsafe { Arc::increment_strong_count(data.cast::<RootShared>()) };
    RawWaker::new(data, &VTABLE)
}

unsafe fn wake(data: *const ()) {
    // SAFETY: `wake` consumes an owned waker (a lent one is never passed by
    // value), whose strong reference this takes over and drops.
    let shared = unsafe { Arc::from_raw(data.cast::<RootShared>()) };
    shared.wake();
}

unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: `data` points into a live `Arc<RootShared>` (see above).
    unsafe { &*data.cast::<RootShared>() }.wake();
}

unsafe fn drop(data: *const ()) {
    // SAFETY: only an owned waker is dropped (a lent one is `ManuallyDrop`),
    // and it owns one strong reference.
    unsafe { Arc::decrement_strong_count(data.cast::<RootShared>()) };
}
