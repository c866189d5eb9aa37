//! **Moving a frame between places** (see [`crate::task::place`] for the
//! place word and the rules): [`relink`] gives a frame polled under a new
//! parent its new place, [`unlink`] gives a place up when its frame ends
//! or moves, on the polling thread or any other.

use crate::record::current::{Active, NO_SLOT};
use crate::record::frame::AsyncStackFrame;
use crate::shim::Ordering;
use crate::task::end;
use crate::task::place::{UNTRACKED, child, incarnation, index, is_root, key_of, own};
use crate::task::record::layout::TaskRecord;
use crate::task::registry;

/// Gives `frame` (at `old`) a place under the frame in slot `parent_slot`
/// of the task `a` is polling, and returns it (see the module docs).
#[cold]
#[inline(never)]
pub(crate) fn relink(frame: &AsyncStackFrame, old: u64, parent_slot: u32, a: &Active) -> u64 {
    let mut old = old;
    if is_root(old) {
        // A task root now polled as a child: its task ends here, and the
        // frame becomes a frame of the task polling it.
        end::end_task(old);
        old = 0;
    }
    let key = a.key();
    // A task root's poll runs on this thread: `frame` is polled as a
    // child.
    let task = TaskRecord::running(a);
    let new = match task {
        None => {
            if old != 0 {
                unlink(old, Some(a));
            }
            child(key, NO_SLOT, parent_slot)
        }
        Some(r) if old != 0 && key_of(old) == key => {
            let own = own(old);
            if own == NO_SLOT {
                child(key, NO_SLOT, parent_slot)
            } else if parent_slot == NO_SLOT {
                // Trees are cut below a frame without a slot, never in the
                // middle: it gives its slot back and is counted.
                r.release(own);
                r.count_hidden(true);
                child(key, NO_SLOT, parent_slot)
            } else {
                r.set_parent(own, parent_slot);
                child(key, own, parent_slot)
            }
        }
        Some(r) => {
            // Most often a frame's first poll, which has nothing to give
            // back: no call then.
            if old != 0 {
                unlink(old, Some(a));
            }
            let own = if parent_slot == NO_SLOT {
                None
            } else {
                r.take(frame.site_id(), parent_slot)
            };
            match own {
                Some(own) => child(key, own, parent_slot),
                None => {
                    r.count_hidden(true);
                    child(key, NO_SLOT, parent_slot)
                }
            }
        }
    };
    frame.place.store(new, Ordering::Relaxed);
    new
}

/// Gives back the child place `place` of a frame that completed, was
/// dropped, or moves elsewhere (the caller clears the frame's place). `a`
/// is this thread's state, `None` during thread teardown.
#[cold]
#[inline(never)]
pub(crate) fn unlink(place: u64, a: Option<&Active>) {
    if place == 0 || is_root(place) || key_of(place) == UNTRACKED {
        return;
    }
    let polled = a
        .filter(|a| a.key() == key_of(place))
        .and_then(TaskRecord::running);
    match polled {
        // This thread polls the place's task: the writer itself.
        Some(r) => match own(place) {
            NO_SLOT => r.count_hidden(false),
            own => r.release(own),
        },
        None => {
            if let Some(r) = registry::record(index(place)) {
                r.retire(incarnation(place), own(place));
            }
        }
    }
}
