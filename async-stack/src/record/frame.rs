//! [`AsyncStackFrame`]: the record every instrumented future carries.
//!
//! # Layout and who touches what
//!
//! The frame is `#[repr(C)]` so that debugger scripts can read it at fixed
//! offsets. Every field is an atomic word written with `Relaxed` stores
//! (plain moves on x86-64 and AArch64), so a signal handler interrupting
//! the polling thread reads whole words.
//!
//! | field | written by | when | meaningful |
//! |---|---|---|---|
//! | `parent` | the polling thread | on **every** poll, from the thread's active frame | while the frame is being polled |
//! | `return_address` | the polling thread | when linked, from its parent's await-site cache | while linked |
//! | `call_site` | the constructor | once | always |
//! | `await_site` | the body, just before each `.await` | at each `.await` | always; null before the first `.await` |
//! | `key` | the constructor, then the body at each `.await` | at each `.await` | always: the frame's published word without its parent |
//! | `link`, `parent_link`, `task` | the polling thread | when the frame is linked (see below) | while the frame holds a place in a task |
//!
//! The parent pointer is stored on every poll, never only on the first: a
//! future can be moved before it is pinned, polled by different parents
//! (`futures::future::Shared`, caches), and dropped on any thread.
//!
//! # Links
//!
//! A frame's place in its task's published stack (see
//! [`crate::task::published`]) lasts from its first poll under a parent
//! until it completes or is dropped. `link` is the frame's identity there:
//! the low 24 bits of its task's id, its birth (a number unique within the
//! task slot) and its slot in the published stack (`0xff`: none, the stack
//! was full); `0` while it holds no place. `parent_link` is its parent's
//! `link` when it was linked. Every poll compares the two words: equal, the
//! frame is where it was (the steady state, no write); different, the
//! parent, the parent's place or the task changed, and the frame takes a
//! new place (a cold call). `task` is the task slot the place is in, for
//! giving it back from a drop on any thread.
//!
//! # The return address
//!
//! folly fills `returnAddress` with `__builtin_return_address(0)` in a
//! never-inlined `await_suspend`. Stable Rust has no such intrinsic, so
//! async-stack resolves it **once per `.await` site**: the first time a
//! body reaches a given `.await`, the site record it publishes (always
//! inlined at the `.await`) takes a cold path that unwinds one frame and
//! keeps the address it returns to, an address in the body's code inside
//! that `.await`. It is cached in the static [`AwaitSite`]; a child copies
//! its parent's when it is linked (its first poll under that parent), and
//! the walker reads the parent's current one, so that a child polled from
//! two `.await`s of one parent is placed at the right one. It symbolises
//! (addr2line) to the line of the parent's `.await`. Polls themselves are
//! inlined into the parent's code in optimised builds, so there is no
//! physical call to return to; the walker reads the same line off the
//! inlined frames of the stack it captures.

use crate::record::site::{AwaitSite, CallSite};
use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use crate::task::TaskSlot;
use crate::task::published::Entry;

/// One async stack frame: the record an instrumented future keeps while it
/// runs, linked to the frame of the future that polls it.
///
/// Frames live inside [`Traced`](crate::Traced) futures. You normally never
/// touch one directly; they are documented because debugger scripts and the
/// sampler read them at fixed offsets (`#[repr(C)]`).
#[repr(C)]
#[derive(Debug)]
pub struct AsyncStackFrame {
    /// The frame that polled this one (valid only during this frame's poll).
    pub(crate) parent: AtomicPtr<AsyncStackFrame>,
    /// An address inside the parent's code that symbolises to the `.await`
    /// that polls this frame; `0` when unknown.
    pub(crate) return_address: AtomicUsize,
    /// The static call-site record (immutable, so a plain reference).
    pub(crate) call_site: &'static CallSite,
    /// The `.await` this frame is suspended on (or was last suspended on).
    pub(crate) await_site: AtomicPtr<AwaitSite>,
    /// The frame's word in its task's published stack, parent aside: the
    /// interned ids of its call site and current await site, encoded as
    /// `task::published::Entry` does. Kept here so that a frame never looks
    /// its ids up on the poll path.
    pub(crate) key: AtomicU64,
    /// The frame's place in its task (see "Links"); `0`: none.
    pub(crate) link: AtomicU64,
    /// The parent's `link` when this frame was linked.
    pub(crate) parent_link: AtomicU64,
    /// The task slot whose published stack holds this frame's place.
    pub(crate) task: AtomicPtr<TaskSlot>,
}

impl AsyncStackFrame {
    pub(crate) fn new(call_site: &'static CallSite) -> Self {
        AsyncStackFrame {
            parent: AtomicPtr::new(std::ptr::null_mut()),
            return_address: AtomicUsize::new(0),
            call_site,
            await_site: AtomicPtr::new(std::ptr::null_mut()),
            key: AtomicU64::new(Entry::encode(0, call_site.id(), 0)),
            link: AtomicU64::new(0),
            parent_link: AtomicU64::new(0),
            task: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The call site of this frame.
    #[inline]
    pub fn call_site(&self) -> &'static CallSite {
        self.call_site
    }

    /// The `.await` this frame is suspended on, or last suspended on.
    #[inline]
    pub fn await_site(&self) -> Option<&'static AwaitSite> {
        let p = self.await_site.load(Ordering::Relaxed);
        // SAFETY: `await_site` only ever holds null or a pointer derived from
        // a `&'static AwaitSite` (see `active::set_await_site`).
        unsafe { p.cast_const().as_ref() }
    }

    /// Records `await_id` (`0`: none) as the await site in this frame's key.
    #[inline(always)]
    pub(crate) fn set_key_await(&self, await_id: u32) {
        let key = self.key.load(Ordering::Relaxed);
        self.key
            .store(Entry::with_await(key, await_id), Ordering::Relaxed);
    }

    /// The return address cached in this frame's current await site: where
    /// a child it polls now returns to (`0` if unknown).
    #[inline]
    pub(crate) fn await_return_address(&self) -> usize {
        self.await_site()
            .map_or(0, AwaitSite::cached_return_address)
    }

    /// The return address into the parent's code, copied from the parent's
    /// await site when this frame was linked (`0` if unknown).
    #[inline]
    pub fn return_address(&self) -> usize {
        self.return_address.load(Ordering::Relaxed)
    }
}

/// The packed `link` word of a frame (see "Links").
///
/// | bits | field |
/// |---|---|
/// | 0..8 | slot in the published stack (`0xff`: none) |
/// | 8..40 | birth |
/// | 40..64 | low 24 bits of the task id |
pub(crate) mod link {
    const NO_SLOT: u64 = 0xff;
    const TASK_SHIFT: u32 = 40;

    /// The link of a frame born `birth` in task `task_id`, in `slot`.
    #[inline(always)]
    pub(crate) fn new(task_id: u64, birth: u32, slot: Option<u32>) -> u64 {
        (task_id << TASK_SHIFT)
            | (u64::from(birth) << 8)
            | slot.map_or(NO_SLOT, |s| u64::from(s) & NO_SLOT)
    }

    /// The frame's slot, if it holds one.
    #[inline(always)]
    pub(crate) fn slot(link: u64) -> Option<u32> {
        let s = link & NO_SLOT;
        (s != NO_SLOT).then_some(s as u32)
    }

    /// The frame's birth.
    #[inline(always)]
    pub(crate) fn birth(link: u64) -> u32 {
        (link >> 8) as u32
    }

    /// Whether `link` was made in the task with id `task_id`.
    #[inline(always)]
    pub(crate) fn in_task(link: u64, task_id: u64) -> bool {
        link >> TASK_SHIFT == task_id & ((1 << (64 - TASK_SHIFT)) - 1)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn fields_round_trip() {
            let l = new(0x1234_5678_9abc, 77, Some(5));
            assert_eq!(slot(l), Some(5));
            assert_eq!(birth(l), 77);
            assert!(in_task(l, 0x1234_5678_9abc));
            assert!(!in_task(l, 0x1234_5678_9abd));
            let none = new(3, u32::MAX, None);
            assert_eq!(slot(none), None);
            assert_eq!(birth(none), u32::MAX);
            assert_ne!(new(1 << 24, 1, Some(0)), 0, "a link is never 0");
        }
    }
}
