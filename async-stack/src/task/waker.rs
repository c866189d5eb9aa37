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
    /// A wake from inside the task's own poll (a yield) is recorded by the
    /// polling thread without atomics: the task ends the poll scheduled.
    /// Any other wake is counted in the task slot (see
    /// [`TaskSlot::wake`](super::TaskSlot::wake)).
    fn wake_by_ref(arc_self: &Arc<Self>) {
        let reg = &arc_self.reg;
        let own = crate::active::with(|a| {
            let own = std::ptr::eq(a.task.get(), reg.slot) && a.task_id.get() == reg.id;
            if own {
                a.self_woken.set(true);
            }
            own
        });
        if own == Some(true) {
            reg.slot.count_self_wake();
        } else {
            reg.slot.wake(reg.generation, crate::clock::now_ms);
        }
        arc_self.executor.wake_by_ref();
    }
}
