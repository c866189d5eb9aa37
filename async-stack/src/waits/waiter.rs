//! Who waits ([`Waiter`]): the task whose poll polled an acquire future
//! or a `JoinHandle`, and the `.await` that polled it, which the wait
//! lasts at.

use crate::record::site::SiteId;
use crate::task::record::layout::awaited_birth;
use crate::task::record::layout::current_task_and_await;
pub(crate) use crate::task::record::layout::{NOT_AT_AWAIT, awaited_site};
use crate::task::stack::CopiedFrame;

/// Who waits: the task whose poll polled the future (`0`: outside any
/// traced root), and the await site its current frame was at, with that
/// frame's birth (see `task::record::layout::awaited`; `0`: not known,
/// the frame has no slot a reader could see it in, or is a `.traced()`
/// future's, which records no `.await`s; [`NOT_AT_AWAIT`]: the frame
/// polled it between two `.await`s, as `futures::poll!` or
/// `now_or_never()` do, and awaits it nowhere).
///
/// Readers count a wait only while the waiter's task is suspended at
/// that `.await` (see [`crate::waits`]): a future raced in `select!` on
/// `&mut future` and kept after another branch won waits no more once its
/// task went on elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waiter {
    pub(crate) task: u64,
    pub(crate) awaiting: u64,
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

/// Whether the frame that `awaiting` names (a known [`Waiter::awaiting`],
/// not `0`) is among `frames`, a root's shown frames, still suspended at
/// the `.await` it names: another frame at the same `.await` (a generic
/// helper called again, a recursion) is not it.
pub(crate) fn suspended_in(awaiting: u64, frames: &[CopiedFrame]) -> bool {
    let at = SiteId::at_await(awaited_site(awaiting)).raw();
    let birth = awaited_birth(awaiting);
    frames
        .iter()
        .any(|f| !f.innermost && f.site == at && f.birth == birth)
}
