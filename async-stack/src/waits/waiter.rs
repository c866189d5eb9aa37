//! Who waits ([`Waiter`]): the task whose poll polled an acquire future
//! or a `JoinHandle`, and the `.await` that polled it, which the wait
//! lasts at.

use crate::task::record::layout::current_task_and_await;

/// Who waits: the task whose poll polled the future (`0`: outside any
/// traced root), and the id of the await site its current frame was at
/// (`0`: none, the future was not polled inside a traced `.await`).
///
/// Readers count a wait only while the waiter's task is suspended at
/// that `.await` (see [`crate::waits`]): a future raced in `select!` on
/// `&mut future` and kept after another branch won waits no more once its
/// task went on elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waiter {
    pub(crate) task: u64,
    pub(crate) awaiting: u32,
}

impl Waiter {
    /// Who polls now: the running task, and the `.await` its current frame
    /// is at.
    #[inline]
    // Its callers are the waits of feature `tokio`.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn now() -> Waiter {
        let (task, awaiting) = current_task_and_await();
        Waiter { task, awaiting }
    }

    /// `task`, at no known `.await`.
    #[cfg(test)]
    pub(crate) const fn of(task: u64) -> Waiter {
        Waiter { task, awaiting: 0 }
    }
}
