//! Tasks nobody can wake: pending, not woken since their last poll, and
//! with every waker of theirs dropped.
//!
//! A task root's record counts the wakers of the task in `refs`: one for
//! the live task, one per clone of the waker its polls lend (see
//! [`crate::task::waker`]). A leaf future that will wake the task keeps a
//! clone (a channel, a timer, a lock's queue); one that returns `Pending`
//! and keeps none, or drops the one it kept, leaves the task with `refs`
//! at one: nothing can wake it again, and it hangs silently. Reading that
//! costs nothing while the program runs (the count exists for the
//! waker's own sake) and no wake recording: [`unwakeable`] reads it.

use std::collections::HashSet;

use super::{TaskInfo, dump};
use crate::task::TaskState;
use crate::task::registry;

/// The live tasks that nothing can wake: pending and idle (not woken since
/// their last poll), with no waker of theirs left anywhere. Each will stay
/// pending for good unless dropped (or polled for another reason, which
/// executors do not do). Sorted by id, as in [`dump()`].
///
/// A tokio task (feature `tokio`) is listed only when every traced root
/// filed under it is: a sibling that can be woken gets the task polled
/// again. A root whose executor changed its waker mid-life (it then holds
/// a second, *fallback* waker; tokio never does this) is never listed: its
/// wakers are not counted in the record.
///
/// Never blocks, pauses or polls a task, and needs no wake recording. A
/// root counts only if, at one instant, it was idle, not woken and
/// without a waker: its poll count, state and wakes were read before and
/// after its waker count, unchanged.
///
/// ```
/// use std::future::Future;
/// use std::sync::Arc;
/// use std::task::{Context, Poll, Wake, Waker};
/// use async_stack::{TracedExt, unwakeable};
///
/// struct Executor;
/// impl Wake for Executor {
///     fn wake(self: Arc<Self>) {}
/// }
///
/// // A future that returns `Pending` and keeps no waker: a lost wakeup.
/// let lost = std::future::poll_fn(|_| Poll::<()>::Pending).traced_named("lost");
/// let mut lost = Box::pin(lost);
/// let waker = Waker::from(Arc::new(Executor));
/// let _ = lost.as_mut().poll(&mut Context::from_waker(&waker));
///
/// let stuck = unwakeable();
/// assert!(stuck.iter().any(|t| t.name.as_deref() == Some("lost")));
/// ```
pub fn unwakeable() -> Vec<TaskInfo> {
    let mut lost = HashSet::new();
    registry::for_each_record(|_, record| {
        lost.extend(record.lost_waker());
    });
    let mut d = dump();
    d.tasks
        .retain(|t| t.state == TaskState::Idle && t.branches.iter().all(|id| lost.contains(id)));
    d.tasks
}
