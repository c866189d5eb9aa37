//! The thread's active async stack: which frame is being polled right now,
//! which task it belongs to, and where that task's published stack is being
//! written.
//!
//! This is the only place that holds the thread-local state. Invariants:
//!
//! - `frame` is non-null only while that frame's `poll` is on this thread's
//!   native stack. [`Traced`](crate::Traced) sets it on entry and restores the
//!   previous value on every exit path, unwinding included (a drop guard). So
//!   every frame reachable from `frame` through `parent` links is alive:
//!   each one is an ancestor whose `poll` has not returned.
//! - `task` is non-null while a task root's poll is on the stack; `cursor`
//!   and `depth` index into that task's published stack.
//! - Every field is a plain `Cell` of a word; a signal handler on this thread
//!   only ever reads them.

use std::cell::Cell;

use crate::frame::AsyncStackFrame;
use crate::site::AwaitSite;
use crate::sync::Ordering;
use crate::task::TaskSlot;
use crate::task::spawn::SpawnInfo;

/// Per-thread active state. `#[repr(C)]` for debugger scripts.
#[repr(C)]
pub(crate) struct Active {
    pub(crate) frame: Cell<*const AsyncStackFrame>,
    pub(crate) task: Cell<*const TaskSlot>,
    pub(crate) task_id: Cell<u64>,
    pub(crate) cursor: Cell<u32>,
    /// Index of the active frame's entry in the published stack.
    pub(crate) index: Cell<u32>,
    pub(crate) depth: Cell<u32>,
    /// Spawn metadata handed from a spawn helper to the task root it polls.
    pub(crate) pending_spawn: Cell<*const SpawnInfo>,
}

thread_local! {
    static ACTIVE: Active = const {
        Active {
            frame: Cell::new(std::ptr::null()),
            task: Cell::new(std::ptr::null()),
            task_id: Cell::new(0),
            cursor: Cell::new(0),
            index: Cell::new(0),
            depth: Cell::new(0),
            pending_spawn: Cell::new(std::ptr::null()),
        }
    };
}

/// Runs `f` with this thread's active state.
///
/// Returns `None` only during thread teardown, when thread-locals are gone.
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&Active) -> R) -> Option<R> {
    ACTIVE.try_with(f).ok()
}

/// Records that the frame being polled on this thread is now suspended on
/// (or about to poll) the `.await` described by `site`.
///
/// Called by the `#[traced_async]` expansion immediately before each
/// `.await`. Outside an instrumented poll it does nothing.
#[inline(always)]
pub fn set_await_site(site: &'static AwaitSite) {
    let _ = ACTIVE.try_with(|a| {
        let frame = a.frame.get();
        // SAFETY: per the module invariant, a non-null `frame` points to a
        // frame whose poll is on this thread's stack, hence alive.
        if let Some(frame) = unsafe { frame.as_ref() } {
            frame.await_site.store(
                site as *const AwaitSite as *mut AwaitSite,
                Ordering::Relaxed,
            );
            publish_await(a, site.id());
        }
    });
}

/// Publishes the active frame's new await site in its task's stack, so
/// readers see where a running frame is now without any per-poll work.
#[inline(always)]
fn publish_await(a: &Active, await_id: u32) {
    // SAFETY: `task` is null or the `&'static TaskSlot` of the task whose
    // poll is on this thread's stack (module invariant).
    if let Some(task) = unsafe { a.task.get().as_ref() } {
        task.stack.set_await(a.index.get(), await_id);
    }
}

/// Records that the frame being polled on this thread finished the
/// `.await` it was suspended on and runs code between two `.await`s.
///
/// Called by the `#[traced_async]` expansion right after each `.await`.
#[inline(always)]
pub fn clear_await_site() {
    let _ = ACTIVE.try_with(|a| {
        // SAFETY: as in `set_await_site`.
        if let Some(frame) = unsafe { a.frame.get().as_ref() } {
            frame
                .await_site
                .store(std::ptr::null_mut(), Ordering::Relaxed);
            publish_await(a, 0);
        }
    });
}

/// The id of the task whose poll is running on this thread, if any.
pub fn current_task_id() -> Option<u64> {
    with(|a| a.task_id.get()).filter(|&id| id != 0)
}
