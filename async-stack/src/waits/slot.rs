//! What the slots of the waits records share (the hold slots of
//! `resource.rs`, the join slots of `join.rs`): each is a sequence lock
//! whose sequence is its generation word, `0` while free.

use crate::shim::{AtomicU64, Ordering, fence};

/// The generation word of a slot being written: a shared slot claimed
/// and not yet recorded or changing its permits, or a join slot whose
/// wait is being written.
pub(crate) const CLAIMED: u64 = u64::MAX;

/// How often a reader tries to read a slot whole before it gives up.
/// Fewer under loom, whose models explore every try.
const READ_TRIES: usize = if cfg!(async_stack_loom) { 2 } else { 16 };

/// What a sequence-lock read of a slot found.
pub(crate) enum Seen<T> {
    /// Generation `0`: nothing in the slot.
    Free,
    /// The fields of the record of this generation, read whole.
    Whole(u64, T),
    /// A record being written every time the reader looked.
    Unsettled,
}

/// Reads the slot whose generation word is `generation` as a sequence
/// lock: the generation (acquire), the fields (`fields`, relaxed loads),
/// an acquire fence, the generation again; equal, non-zero and not
/// [`CLAIMED`] means the fields are that record's. Each writer stores
/// `0` or `CLAIMED` and a release fence before any field, and the new
/// generation with release ordering after the last.
#[inline(always)]
pub(crate) fn read_whole<T>(generation: &AtomicU64, fields: impl Fn() -> T) -> Seen<T> {
    for _ in 0..READ_TRIES {
        let seen = generation.load(Ordering::Acquire);
        if seen == 0 {
            return Seen::Free;
        }
        if seen == CLAIMED {
            std::hint::spin_loop();
            continue;
        }
        let read = fields();
        fence(Ordering::Acquire);
        if generation.load(Ordering::Relaxed) == seen {
            return Seen::Whole(seen, read);
        }
    }
    Seen::Unsettled
}
