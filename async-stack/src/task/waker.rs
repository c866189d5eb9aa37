//! The waker a task root hands to the future it polls, so that a wake marks
//! the task *scheduled* before the executor's own waker runs.
//!
//! One [`TaskWaker`] is allocated per task (at its first poll) and rebuilt
//! only when the executor passes a waker that would not wake the same task
//! (`Waker::will_wake`), which executors such as tokio never do for a given
//! task. In the steady state a root poll compares two words and passes
//! `&Waker` through: no allocation, no reference count traffic.

use std::sync::Arc;
use std::task::{Wake, Waker};

use super::TaskSlot;
use crate::sync::Ordering;

pub(crate) struct TaskWaker {
    slot: &'static TaskSlot,
    generation: u32,
    inner: Waker,
}

impl TaskWaker {
    pub(crate) fn new_waker(slot: &'static TaskSlot, generation: u32, inner: &Waker) -> Waker {
        Waker::from(Arc::new(TaskWaker {
            slot,
            generation,
            inner: inner.clone(),
        }))
    }

    fn note_wake(&self) {
        if self
            .slot
            .mark_woken(self.generation, crate::clock::now_ns())
        {
            self.slot.wakes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.note_wake();
        self.inner.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.note_wake();
        self.inner.wake_by_ref();
    }
}

/// The waker state a root keeps: ours, and the executor's it wraps.
pub(crate) struct RootWaker {
    ours: Waker,
    /// A clone of the executor waker `ours` wraps, for `will_wake`.
    executor: Waker,
}

impl RootWaker {
    pub(crate) fn new(slot: &'static TaskSlot, generation: u32, executor: &Waker) -> Self {
        RootWaker {
            ours: TaskWaker::new_waker(slot, generation, executor),
            executor: executor.clone(),
        }
    }

    /// Returns our waker, rebuilding it if the executor's waker changed.
    #[inline]
    pub(crate) fn get(
        &mut self,
        slot: &'static TaskSlot,
        generation: u32,
        executor: &Waker,
    ) -> &Waker {
        if !self.executor.will_wake(executor) {
            *self = RootWaker::new(slot, generation, executor);
        }
        &self.ours
    }
}
