//! The slot of an awaited `JoinHandle`'s wait: a slot of a never-freed
//! arena of the waits registry (`resource.rs`), not a resource of its
//! own. `join_wait.rs` takes and frees slots.
//!
//! A `JoinHandle` has one waiter (it is not `Clone`) and no holder: its
//! wait is blocked by the awaited task's roots. A resource per handle, as
//! the locks have, cost every `spawn(work()).await` that waited three
//! allocations and two turns of the registry's lock (about 200 ns, more
//! than the task root itself; see BENCHMARKS.md). A join wait takes a
//! slot from the arena's free list and writes it as a sequence lock:
//!
//! - `write` (the wait's start): the generation word to [`CLAIMED`], a
//!   release fence, the fields, then the wait's generation with release
//!   ordering. Only the slot's taker writes it, until it frees it.
//! - `clear` (the wait's end: the task ended, or the handle was dropped):
//!   the generation word back to 0, before the slot is freed.
//! - a read: the generation (acquire), the fields, an acquire fence, the
//!   generation again; equal, non-zero and not [`CLAIMED`] means the
//!   fields are the wait's. Generations come from the process-wide
//!   counter (`next_generation`), so a slot reused between the two loads
//!   never shows the same generation twice.
//!
//! Besides the waiting task, the slot keeps the await site the waiter's
//! frame was at when it polled the handle: readers count the wait only
//! while the waiter is suspended there (see the parent module).
//!
//! Readers copy a slot as a resource of kind `JoinHandle` with this one
//! wait (`Registry::copies`), and a second pass finds it unchanged if the
//! slot still holds that generation ([`JoinSlot::holds`]). Debuggers read
//! the slots through the debug descriptor.

// The writer is the `JoinHandle` of feature `tokio` (and the tests).
#![cfg_attr(not(feature = "tokio"), allow(dead_code))]

use std::mem::offset_of;
use std::panic::Location;

use crate::shim::{AtomicPtr, AtomicU64, Ordering, fence};
use crate::waits::slot::{CLAIMED, Seen, read_whole};
use crate::waits::waiter::Waiter;

/// A join wait read whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JoinRead {
    pub(crate) generation: u64,
    pub(crate) task: u64,
    pub(crate) target: u64,
    pub(crate) since_ms: u64,
    pub(crate) spawned_at: &'static Location<'static>,
    /// The `.await` that polled the handle and the frame that was there
    /// ([`Waiter::awaiting`]; `0`: none known).
    pub(crate) awaiting: u64,
    /// That frame's ancestry ([`Waiter::path`]; `0`: none known).
    pub(crate) path: u64,
}

/// One join wait's words (generation 0: a free slot).
#[derive(Debug)]
pub(crate) struct JoinSlot {
    /// 0 (free), [`CLAIMED`] (being written), or the wait's generation.
    generation: AtomicU64,
    /// The waiting task (0: outside any traced root).
    task: AtomicU64,
    /// The tokio id of the awaited task.
    target: AtomicU64,
    since_ms: AtomicU64,
    /// Where the awaited task was spawned; null while free.
    spawned_at: AtomicPtr<Location<'static>>,
    /// The id of the await site the waiter polled the handle at (`0`: not
    /// at a traced `.await`): the wait lasts only while the waiter is
    /// suspended there (see [`crate::waits`]).
    awaiting: AtomicU64,
    /// The ancestry of the frame that was there ([`Waiter::path`]).
    path: AtomicU64,
}

impl JoinSlot {
    /// Where a debugger finds the words (see the debug descriptor).
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const GENERATION_OFFSET: usize = offset_of!(JoinSlot, generation);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const TASK_OFFSET: usize = offset_of!(JoinSlot, task);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const TARGET_OFFSET: usize = offset_of!(JoinSlot, target);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const SINCE_OFFSET: usize = offset_of!(JoinSlot, since_ms);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const SPAWNED_AT_OFFSET: usize = offset_of!(JoinSlot, spawned_at);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const AWAITING_OFFSET: usize = offset_of!(JoinSlot, awaiting);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const PATH_OFFSET: usize = offset_of!(JoinSlot, path);

    pub(crate) fn new() -> Self {
        JoinSlot {
            generation: AtomicU64::new(0),
            task: AtomicU64::new(0),
            target: AtomicU64::new(0),
            since_ms: AtomicU64::new(0),
            spawned_at: AtomicPtr::new(std::ptr::null_mut()),
            awaiting: AtomicU64::new(0),
            path: AtomicU64::new(0),
        }
    }

    /// Writes the wait `generation` (a number of `next_generation`, never
    /// used before) into the slot, whose taker alone writes it. `waiter`:
    /// the waiting task and the await site it polled the handle at.
    pub(crate) fn write(
        &self,
        generation: u64,
        waiter: Waiter,
        target: u64,
        since_ms: u64,
        spawned_at: &'static Location<'static>,
    ) {
        self.generation.store(CLAIMED, Ordering::Relaxed);
        // `CLAIMED` before any field: a reader that reads a field of this
        // write then reads `CLAIMED` or the new generation, and retries.
        fence(Ordering::Release);
        self.task.store(waiter.task, Ordering::Relaxed);
        self.awaiting.store(waiter.awaiting, Ordering::Relaxed);
        self.path.store(waiter.path, Ordering::Relaxed);
        self.target.store(target, Ordering::Relaxed);
        self.since_ms.store(since_ms, Ordering::Relaxed);
        self.spawned_at
            .store(std::ptr::from_ref(spawned_at).cast_mut(), Ordering::Relaxed);
        self.generation.store(generation, Ordering::Release);
    }

    /// The waiter, for the slot's taker (which wrote it).
    pub(crate) fn waiter(&self) -> Waiter {
        Waiter {
            task: self.task.load(Ordering::Relaxed),
            awaiting: self.awaiting.load(Ordering::Relaxed),
            path: self.path.load(Ordering::Relaxed),
        }
    }

    /// Ends the wait. Release: the next claimer's writes come after it.
    pub(crate) fn clear(&self) {
        self.generation.store(0, Ordering::Release);
    }

    /// The wait, if one was read whole; `None` for a free slot, or one
    /// rewritten at every try (a handle awaited and dropped that fast is
    /// nobody's deadlock).
    pub(crate) fn read(&self) -> Option<JoinRead> {
        let seen = read_whole(&self.generation, || {
            (
                self.task.load(Ordering::Relaxed),
                self.target.load(Ordering::Relaxed),
                self.since_ms.load(Ordering::Relaxed),
                self.spawned_at.load(Ordering::Relaxed),
                self.awaiting.load(Ordering::Relaxed),
                self.path.load(Ordering::Relaxed),
            )
        });
        let Seen::Whole(generation, (task, target, since_ms, spawned_at, awaiting, path)) = seen
        else {
            return None;
        };
        // SAFETY: `spawned_at` only ever holds null or a
        // `&'static Location` (`write` stores nothing else).
        let spawned_at = unsafe { spawned_at.as_ref() }?;
        Some(JoinRead {
            generation,
            task,
            target,
            since_ms,
            spawned_at,
            awaiting,
            path,
        })
    }

    /// For the debugger-script tests' hooks (`debug::testing`): shows the
    /// slot, if it holds a wait, as being written ([`CLAIMED`]), as a
    /// waiter stopped in the middle of its write leaves it; whether it
    /// did. The wait's end still frees the slot.
    #[cfg(not(async_stack_loom))]
    pub(crate) fn show_claimed(&self) -> bool {
        let seen = self.generation.load(Ordering::Acquire);
        seen != 0
            && seen != CLAIMED
            && self
                .generation
                .compare_exchange(seen, CLAIMED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Whether the slot still holds the wait `generation`.
    pub(crate) fn holds(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }
}
