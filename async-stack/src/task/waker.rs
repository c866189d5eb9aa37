//! The waker a task root hands to the future it polls, so that a wake
//! marks the task *scheduled* before the executor's own waker runs.
//!
//! # The record's waker
//!
//! The task's waker needs no allocation: its data is the index of the
//! task's record, which holds the executor's waker (see
//! [`crate::task::record`]). Each poll lends it without touching a
//! reference count; a clone counts one reference in the record's `refs`,
//! which also counts one for the live task. The record is recycled only
//! when its task has ended and `refs` reaches zero, so a waker always
//! refers to the task it was made for, and the executor's waker it
//! forwards to is alive and never written while any waker exists. Every
//! waker of a task has the same data and vtable, so `Waker::will_wake`
//! recognises them and executors and leaf futures do not clone anew on
//! every poll.
//!
//! # Guarantees
//!
//! - **Every wake reaches its executor**: a wake of a clone made at any
//!   poll runs the executor's waker that poll was given, whatever
//!   executors and waker vtables the process has (the record keeps any
//!   waker, boxed if its vtable is not interned; see
//!   [`crate::task::record::vtables`]).
//! - **A waker never wakes another task**, even when the program forgets
//!   wakers (`mem::forget`) without bound: the reference count sticks
//!   instead of wrapping (see [`crate::task::record::layout::refs`]), and
//!   the record of a count that stuck is never reused. Where `Arc` would
//!   abort the process, this keeps one task record (128 bytes) and its
//!   executor's waker for the rest of the process.
//! - Dropping the last waker of an ended task drops the executor's waker
//!   (unless its count stuck): nothing else is kept.
//!
//! A wake from inside the task's own poll (a yield) is counted by the
//! polling thread without atomics, in its thread state; any other wake is
//! counted in the record by compare-and-swap. Then the executor's waker
//! runs.
//!
//! # A second waker
//!
//! An executor may pass a different waker to a later poll (`will_wake`
//! fails against the one in the record; tokio never does this). The
//! record's waker cannot change while clones of it may be in use, so the
//! root then allocates a *fallback*: an `Arc` holding the new executor
//! waker and one reference to the record, kept in the task's extension
//! (see [`crate::task::record::TaskExt`]), and lends that one instead. Old
//! clones keep waking the old executor waker, as they would with any
//! waker that changed; leaf futures re-register on their next poll.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;
use std::task::{RawWaker, RawWakerVTable, Waker};

use crate::record::current;
use crate::shim::{Ordering, fence};
use crate::task::record::TaskRecord;
use crate::task::registry;

/// A task's waker lent for one poll. Not `Send`: it stays with the poll
/// that borrowed it, whose task holds the reference it relies on.
pub(crate) struct LentWaker {
    waker: ManuallyDrop<Waker>,
    _not_send: PhantomData<*const ()>,
}

impl Deref for LentWaker {
    type Target = Waker;

    #[inline(always)]
    fn deref(&self) -> &Waker {
        &self.waker
    }
}

/// The waker of the task in record `index`, lent for a poll.
#[inline(always)]
pub(crate) fn lend(index: u32) -> LentWaker {
    // SAFETY: `data` names record `index`, whose task is being polled (the
    // live task holds a reference), which is what `VTABLE`'s functions
    // require. The waker is never dropped (`ManuallyDrop`), so it gives
    // back no reference it did not take; a clone takes its own.
    let waker = unsafe { Waker::from_raw(RawWaker::new(data_of(index), &VTABLE)) };
    LentWaker {
        waker: ManuallyDrop::new(waker),
        _not_send: PhantomData,
    }
}

#[inline(always)]
fn data_of(index: u32) -> *const () {
    std::ptr::without_provenance(index as usize)
}

#[inline(always)]
fn record_of(data: *const ()) -> &'static TaskRecord {
    match registry::record(data.addr() as u32) {
        Some(r) => r,
        None => unreachable!("a waker names a record of the registry"),
    }
}

/// One `static`, so that every waker of a task has the same vtable address
/// and `Waker::will_wake` recognises clones.
static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop);

// Each function below receives `data` from `lend` or from `clone`: the
// index of a record that a reference keeps (the live task's, for a lent
// waker; the waker's own, for an owned one).

unsafe fn clone(data: *const ()) -> RawWaker {
    record_of(data).add_ref();
    #[cfg(not(async_stack_loom))]
    if crate::task::probe::on() {
        crate::task::probe::cloned(data.addr() as u32);
    }
    RawWaker::new(data, &VTABLE)
}

unsafe fn wake(data: *const ()) {
    // SAFETY: `wake` consumes an owned waker (a lent one is never passed by
    // value): wake, then give its reference back.
    unsafe {
        wake_by_ref(data);
        drop(data);
    }
}

unsafe fn wake_by_ref(data: *const ()) {
    let r = record_of(data);
    count_wake(r, data.addr() as u32);
    // SAFETY: a reference (the caller's waker's) is held, so the record's
    // executor waker is alive and not written.
    unsafe { r.with_executor_waker(Waker::wake_by_ref) };
}

unsafe fn drop(data: *const ()) {
    let index = data.addr() as u32;
    let before = release(index);
    #[cfg(not(async_stack_loom))]
    if crate::task::probe::on() && before > 1 {
        crate::task::probe::dropped(index, before - 1);
    }
    #[cfg(async_stack_loom)]
    let _ = before;
}

/// Counts a wake of the task of `r`: in the thread state if `r`'s task is
/// being polled on this thread (a yield), else in the record.
#[inline(always)]
fn count_wake(r: &TaskRecord, index: u32) {
    let own = current::with(|a| {
        let own = std::ptr::eq(a.record().cast::<TaskRecord>(), r);
        if own {
            a.self_wakes.set(a.self_wakes.get().wrapping_add(1));
        }
        own
    });
    if own != Some(true) {
        r.count_wake(crate::clock::now_ms);
        #[cfg(not(async_stack_loom))]
        if crate::task::probe::on() {
            crate::task::probe::woken(index, r);
        }
    }
    // The wake recorder is not modelled under loom.
    #[cfg(async_stack_loom)]
    let _ = index;
}

/// Gives back one reference to record `index`; the last one recycles it.
/// Returns how many there were.
pub(crate) fn release(index: u32) -> u32 {
    let r = record_of(data_of(index));
    let before = r.drop_ref();
    if before == 1 {
        // Every use of the record through another reference happens before
        // this (their decrements are releases).
        fence(Ordering::Acquire);
        registry::recycle(r, index);
    }
    before
}

/// The second waker of a root whose executor changed its waker: the new
/// executor waker, and one reference to the task's record.
pub(crate) struct Fallback {
    index: u32,
    executor: Waker,
}

impl Drop for Fallback {
    fn drop(&mut self) {
        let _ = release(self.index);
    }
}

impl Fallback {
    /// A fallback for the task of record `index`, which the caller's task
    /// poll keeps alive.
    pub(crate) fn new(index: u32, executor: &Waker) -> Arc<Fallback> {
        record_of(data_of(index)).add_ref();
        Arc::new(Fallback {
            index,
            executor: executor.clone(),
        })
    }

    /// Whether the executor's waker of this fallback still wakes like
    /// `executor`.
    pub(crate) fn wakes_like(&self, executor: &Waker) -> bool {
        self.executor.will_wake(executor)
    }

    /// The waker of the fallback at `this`, lent for a poll.
    ///
    /// # Safety
    ///
    /// `this` comes from `Arc::into_raw`, and that `Arc` stays alive for as
    /// long as the returned waker is used.
    pub(crate) unsafe fn lend(this: *const Fallback) -> LentWaker {
        // SAFETY: `this` points into an `Arc<Fallback>` that outlives the
        // returned value (the caller's obligation), as `FALLBACK_VTABLE`
        // requires; the waker is never dropped, so it gives back no
        // reference it did not take.
        let waker = unsafe { Waker::from_raw(RawWaker::new(this.cast(), &FALLBACK_VTABLE)) };
        LentWaker {
            waker: ManuallyDrop::new(waker),
            _not_send: PhantomData,
        }
    }

    fn wake(&self) {
        let r = record_of(data_of(self.index));
        count_wake(r, self.index);
        self.executor.wake_by_ref();
    }
}

static FALLBACK_VTABLE: RawWakerVTable =
    RawWakerVTable::new(fb_clone, fb_wake, fb_wake_by_ref, fb_drop);

// Each function below receives a `data` pointer that came from
// `Arc::<Fallback>::as_ptr` (a lent waker) or from `fb_clone` (a waker
// owning one strong reference), for an `Arc` alive while the waker is.

unsafe fn fb_clone(data: *const ()) -> RawWaker {
    // SAFETY: `data` points into a live `Arc<Fallback>` (see above); the
    // new waker owns the reference taken here.
    unsafe { Arc::increment_strong_count(data.cast::<Fallback>()) };
    RawWaker::new(data, &FALLBACK_VTABLE)
}

unsafe fn fb_wake(data: *const ()) {
    // SAFETY: `wake` consumes an owned waker, whose strong reference this
    // takes over and drops.
    let fallback = unsafe { Arc::from_raw(data.cast::<Fallback>()) };
    fallback.wake();
}

unsafe fn fb_wake_by_ref(data: *const ()) {
    // SAFETY: `data` points into a live `Arc<Fallback>` (see above).
    unsafe { &*data.cast::<Fallback>() }.wake();
}

unsafe fn fb_drop(data: *const ()) {
    // SAFETY: only an owned waker is dropped (a lent one is `ManuallyDrop`),
    // and it owns one strong reference.
    unsafe { Arc::decrement_strong_count(data.cast::<Fallback>()) };
}
