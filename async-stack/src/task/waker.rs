//! The waker a task root hands to the future it polls, so that a wake marks
//! the task *scheduled* before the executor's own waker runs.
//!
//! One [`RootShared`] is allocated per task (at its first poll). It holds
//! the task's registration and the executor's waker, and is itself the
//! waker handed down (through `futures`' `waker_ref`, which lends it without
//! touching the reference count). So a task root keeps a single pointer in
//! its future, and in the steady state a root poll compares two words and
//! passes `&Waker` through: no allocation, no reference count traffic. It is
//! rebuilt only when the executor passes a waker that would not wake the
//! same task (`Waker::will_wake`), which executors such as tokio never do.

use std::sync::Arc;
use std::task::Waker;

use futures_util::task::ArcWake;

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
}

impl ArcWake for RootShared {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        let slot = arc_self.reg.slot;
        if slot.mark_woken(arc_self.reg.generation, crate::clock::now_ns) {
            slot.wakes.fetch_add(1, Ordering::Relaxed);
        }
        arc_self.executor.wake_by_ref();
    }
}
