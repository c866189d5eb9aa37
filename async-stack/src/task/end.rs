//! **The end of a task** ([`end_task`]): when its root completes, is
//! dropped, or is polled as a child of another task (it then belongs to
//! that task, and must not linger as a ghost), the record's id is
//! cleared, its incarnation closed (frames of the ended task can no longer
//! touch it), its chunks given back, its name and fallback waker (in its
//! extension) released, and the task's reference to the record dropped.
//! The last reference (the task's or a waker's) recycles the record
//! ([`crate::task::registry::recycle`]).

use std::sync::Arc;

use crate::shim::Ordering;
use crate::task::place::{self, UNTRACKED};
use crate::task::record::layout::{TaskRecord, spawn as spawn_word};
use crate::task::registry;
use crate::task::waker::{self, Fallback};

/// Ends the task whose root's place was `p` (see the module docs). Any
/// thread; does nothing for an untracked root.
pub(crate) fn end_task(p: u64) {
    if !place::is_root(p) || place::key_of(p) == UNTRACKED {
        return;
    }
    let index = place::index(p);
    if let Some(r) = registry::record(index) {
        end_task_in(r, index);
    }
}

/// [`end_task`] for a tracked task whose record (index `index`) the caller
/// has: the root's own exit, when it completes.
pub(crate) fn end_task_in(r: &TaskRecord, index: u32) {
    #[cfg(not(async_stack_loom))]
    if crate::task::probe::on() {
        crate::task::probe::task_ended(index, r.id.load(Ordering::Relaxed));
    }
    r.id.store(0, Ordering::Release);
    r.close_incarnation();
    r.release_chunks();
    // `parent` and `spawn` stay: nobody reads a free record's, and the
    // next task's registration writes both.
    let spawn = r.spawn.load(Ordering::Relaxed);
    let named = spawn_word::named(spawn);
    if let Some(e) = spawn_word::has_ext(spawn)
        .then(|| registry::ext(index))
        .flatten()
    {
        // Clearing an empty name is skipped: an `arc-swap` store is not
        // free.
        if named {
            e.name.store(None);
        }
        // Most tasks have none: a load, not a read-modify-write.
        let f = match e.fallback.load(Ordering::Acquire) {
            f if f.is_null() => f,
            _ => e.fallback.swap(std::ptr::null_mut(), Ordering::AcqRel),
        };
        if !f.is_null() {
            // SAFETY: the extension owned this `Arc` (see `fallback`), and
            // the task's polls are over.
            drop(unsafe { Arc::from_raw(f.cast_const().cast::<Fallback>()) });
        }
    }
    // The task's own reference to the record. When it is the only one
    // left, no waker of the task exists, and none can appear (a waker is
    // cloned from a waker, or from the one lent to the task's poll, which
    // is over): the record is recycled without a read-modify-write. The
    // acquire load pairs with the release decrement of the last waker
    // dropped, as in `waker::release`.
    if r.refs.load(Ordering::Acquire) == 1 {
        r.refs.store(0, Ordering::Relaxed);
        registry::recycle(r, index);
    } else {
        let _ = waker::release(index);
    }
}
