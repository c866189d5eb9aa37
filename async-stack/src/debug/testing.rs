//! Hooks for the debugger-script tests, which must corrupt a live chain,
//! the descriptor and the waits to check that the scripts report it cleanly
//! (exported as `debug::__testing`). Not part of the API.

// `std`'s: see the parent module.
use std::sync::atomic::Ordering;

use super::{ASYNC_STACK_DEBUG, VERSION};
use crate::record::frame::AsyncStackFrame;
use crate::record::site::CallSite;
use crate::waits::resource::{Registry, SHARED_SLOTS};

/// Overwrites the descriptor's magic number (the scripts must then
/// refuse it).
pub fn corrupt_descriptor_magic() {
    ASYNC_STACK_DEBUG
        .magic
        .store(0x0bad_0bad, Ordering::Relaxed);
}

/// Overwrites the descriptor's version with one no script knows.
pub fn corrupt_descriptor_version() {
    ASYNC_STACK_DEBUG
        .version
        .store(VERSION + 1000, Ordering::Relaxed);
}

/// A chain of `n` frames, each the parent of the one before, all at one
/// call site, leaked: a parent for a chain deeper than a script's limit.
pub fn leaked_chain(n: usize) -> *const AsyncStackFrame {
    static SITE: CallSite = CallSite::new("leaked_chain", "", file!(), line!(), 1, true);
    let frames: &'static [AsyncStackFrame] =
        Vec::leak((0..n).map(|_| AsyncStackFrame::new(&SITE)).collect());
    for pair in frames.windows(2) {
        pair[0]
            .parent
            .store(std::ptr::from_ref(&pair[1]).cast_mut(), Ordering::Relaxed);
    }
    frames.first().map_or(std::ptr::null(), std::ptr::from_ref)
}

/// Sets the parent link of the frame being polled on this thread to
/// `parent` (null: no frame is polled). Returns the frame.
pub fn set_current_parent(parent: *const AsyncStackFrame) -> *const AsyncStackFrame {
    let frame = crate::record::current::current().frame();
    // SAFETY: a non-null current frame is one whose poll is on this
    // thread's stack, hence alive (invariant of `current`).
    if let Some(f) = unsafe { frame.as_ref() } {
        f.parent.store(parent.cast_mut(), Ordering::Relaxed);
    }
    frame
}

/// Overwrites the length of the `waits` list that debuggers read (the
/// resource's `ListsView`) of every resource listed in the waits registry
/// with `len`; the process's own lists are untouched. Returns how many
/// resources it changed.
pub fn corrupt_waits_len(len: usize) -> usize {
    let listed = Registry::global().listed();
    for r in &listed {
        r.view.waits_len.store(len, Ordering::Relaxed);
    }
    listed.len()
}

/// Shows the lists of every resource listed in the waits registry to
/// debuggers as caught in the middle of a change (an odd version in the
/// resource's `ListsView`); the process's own lists are untouched. Shows
/// every join wait as caught in the middle of its write too (its slot's
/// generation `CLAIMED`): a join slot has no copy of its own for
/// debuggers, so the process, which then skips the wait, sees it so as
/// well. Returns how many resources and join waits it changed.
pub fn mark_waits_changing() -> usize {
    let listed = Registry::global().listed();
    for r in &listed {
        r.view.version.fetch_or(1, Ordering::Relaxed);
    }
    listed.len() + mark_joins_claimed()
}

/// Sets the generation of every join slot that holds a wait to
/// `CLAIMED`, as a waiter stopped in the middle of its write leaves it;
/// returns how many. The wait's end still frees the slot (its generation
/// back to `0`).
fn mark_joins_claimed() -> usize {
    Registry::global()
        .joins()
        .handed_out()
        .filter(|slot| slot.show_claimed())
        .count()
}

/// Shows the lists of the oldest resource listed in the waits registry
/// (the smallest key: the first created) to debuggers as caught in the
/// middle of a change, as [`mark_waits_changing`] does for all. Returns
/// whether a resource was listed.
pub fn mark_oldest_waits_changing() -> bool {
    let listed = Registry::global().listed();
    if let Some(r) = listed.first() {
        r.view.version.fetch_or(1, Ordering::Relaxed);
    }
    !listed.is_empty()
}

/// Leaves a free shared slot of every resource listed in the waits
/// registry that has shared slots (`RwLock`, `Semaphore`) claimed and
/// never written, as a holder preempted right after its claim leaves it:
/// debuggers then read the resource as caught in the middle of a change.
/// The slot stays claimed for good. Returns how many resources it changed.
pub fn claim_free_shared_slots() -> usize {
    Registry::global()
        .listed()
        .iter()
        .filter(|r| (0..SHARED_SLOTS).any(|i| r.claim_only(i)))
        .count()
}

/// How many join slots were ever handed out (free or not): the memory
/// that awaited spawn-helper `JoinHandle`s keep, for a test that holds it
/// to the peak of joins waiting at once.
pub fn join_slots_handed_out() -> usize {
    Registry::global().joins().len()
}

/// How many pages of task extensions and of tokio ids are allocated: what
/// a process of many tasks pays beside their records, for a test that
/// holds it to what the README says.
pub fn side_pages_allocated() -> (usize, usize) {
    use crate::shim::AtomicPtr;
    use crate::task::registry::{EXT_PAGES, TOKIO_PAGES};
    fn count<T>(pages: &[AtomicPtr<T>]) -> usize {
        pages
            .iter()
            .filter(|p| !p.load(Ordering::Acquire).is_null())
            .count()
    }
    (count(&EXT_PAGES), count(&TOKIO_PAGES))
}
