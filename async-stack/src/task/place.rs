//! A frame's **place**: where it is in a task's published stack, as one
//! packed word kept in the frame, and the state machine that moves it
//! (carried out in [`crate::task::relink`]).
//!
//! # The word
//!
//! | bits | field |
//! |---|---|
//! | 0..6 | the frame's own slot ([`NO_SLOT`]: it holds none and is counted hidden; `0` for a root) |
//! | 6..36 | the incarnation of the record (from 1; see [`crate::task::record`]) |
//! | 36..57 | the record's index ([`UNTRACKED_RECORD`]: a task the registry could not take) |
//! | 57 | [`ROOT`]: the frame is its task's root |
//! | 58..64 | the parent's slot ([`NO_SLOT`]: the parent holds none; `0` for a root) |
//!
//! `0` means no place. Bits 6 to 56 are the task's **key**: the thread
//! polling a task keeps it (see [`crate::record::current`]), so a child
//! checks on every poll, with one compare, that it is still where it was:
//! in the same task, under a frame in the same slot
//! ([`holds`]). A root never passes that check (a key has no root bit),
//! nor does an unplaced frame (keys are never 0, since incarnations start
//! at 1).
//!
//! The parent's slot sits where the current-frame word carries the slot of
//! the frame it holds (bits 58 to 63, see
//! [`crate::record::current::SLOT_SHIFT`]): a child compares its place,
//! own slot masked off, with the key or'ed with its parent's word's top
//! bits, the same bits it clears to find its parent; and it makes its own
//! current-frame word by shifting its place left (its own slot is in the
//! low bits). A handful of instructions on every poll of every level.
//!
//! # The state machine
//!
//! A frame moves between these states, always on the thread that polls or
//! drops it:
//!
//! - **no place** (`0`): never polled, or given back;
//! - **in a slot** of task *T* under slot *p*: steady while its parent's
//!   slot stays *p* (a new parent in the same slot changes nothing in the
//!   tree, which names slots);
//! - **hidden** in *T* (no slot: the stack was full, or its parent holds
//!   none): counted in *T*'s hidden frames;
//! - **root** of *T*: see [`crate::task::root`].
//!
//! [`relink`](crate::task::relink::relink) runs when the check fails:
//! under another parent slot of the same task the frame keeps its slot and
//! only its parent changes; in another task, or from no place, it gives
//! back the old place and takes a new one; a root polled as a child ends
//! its task first, so that it never lingers as a ghost task.
//! [`unlink`](crate::task::relink::unlink) gives a place back: directly
//! when this thread is polling the place's task, and otherwise as a
//! foreign retirement, which the task's incarnation check makes harmless
//! once that task has ended.

use crate::record::frame::AsyncStackFrame;

pub(crate) use crate::record::current::NO_SLOT;
use crate::record::current::SLOT_BITS;

const OWN_MASK: u64 = NO_SLOT as u64;
const INC_SHIFT: u32 = SLOT_BITS;
/// Bits of an incarnation number.
pub(crate) const INC_BITS: u32 = 30;
const RECORD_SHIFT: u32 = INC_SHIFT + INC_BITS;
/// Bits of a record index.
pub(crate) const RECORD_BITS: u32 = 21;
const RECORD_MASK: u64 = (1 << RECORD_BITS) - 1;
/// The frame is its task's root.
pub(crate) const ROOT: u64 = 1 << (RECORD_SHIFT + RECORD_BITS);
/// Where the parent's slot starts.
pub(crate) const PARENT_SHIFT: u32 = 64 - SLOT_BITS;
const KEY_MASK: u64 = (ROOT - 1) & !OWN_MASK;

/// The record index of untracked tasks (no record).
pub(crate) const UNTRACKED_RECORD: u32 = (1 << RECORD_BITS) - 1;
/// The key of every untracked task.
pub(crate) const UNTRACKED: u64 = key(UNTRACKED_RECORD, 1);

/// The last incarnation a record may reach; a record that reaches it is
/// retired (see [`crate::task::record`]). Small in the crate's own tests,
/// so that they reach it.
pub(crate) const INCARNATION_LIMIT: u32 = if cfg!(test) { 16 } else { (1 << INC_BITS) - 1 };

const _: () = assert!(RECORD_SHIFT + RECORD_BITS + 1 == PARENT_SHIFT);
#[cfg(target_arch = "x86_64")]
const _: () = assert!(PARENT_SHIFT == crate::record::current::SLOT_SHIFT);

/// The key of incarnation `inc` of record `record`.
#[inline(always)]
pub(crate) const fn key(record: u32, inc: u32) -> u64 {
    ((record as u64) << RECORD_SHIFT) | ((inc as u64 & ((1 << INC_BITS) - 1)) << INC_SHIFT)
}

/// A child's place: slot `own` (or [`NO_SLOT`]) under slot `parent`, in
/// the task of `key`.
#[inline(always)]
pub(crate) fn child(key: u64, own: u32, parent: u32) -> u64 {
    key | (u64::from(parent) << PARENT_SHIFT) | u64::from(own)
}

/// The place of the root of the task of `key`: slot 0, no parent.
#[inline(always)]
pub(crate) fn root(key: u64) -> u64 {
    ROOT | key
}

#[inline(always)]
pub(crate) fn own(place: u64) -> u32 {
    (place & OWN_MASK) as u32
}

/// The slot of a child's parent (`0` for a root).
#[inline]
pub(crate) fn parent(place: u64) -> u32 {
    (place >> PARENT_SHIFT) as u32
}

#[inline(always)]
pub(crate) fn key_of(place: u64) -> u64 {
    place & KEY_MASK
}

/// The index of the record of the task `place` is in.
#[inline(always)]
pub(crate) fn index(place: u64) -> u32 {
    ((place >> RECORD_SHIFT) & RECORD_MASK) as u32
}

#[inline(always)]
pub(crate) fn incarnation(place: u64) -> u32 {
    ((place >> INC_SHIFT) & ((1 << INC_BITS) - 1)) as u32
}

#[inline(always)]
pub(crate) fn is_root(place: u64) -> bool {
    place & ROOT != 0
}

/// The record index of a tracked task root's place; `None` for any other
/// place (a child's, none, or an untracked root's). One compare: the bits
/// from the record's index up, less the root bit, are below
/// `UNTRACKED_RECORD` only for a root (whose parent field is 0) of a
/// tracked task.
#[inline(always)]
pub(crate) fn tracked_root(place: u64) -> Option<u32> {
    let r = (place >> RECORD_SHIFT) as u32;
    let index = r.wrapping_sub(1 << RECORD_BITS);
    (index < UNTRACKED_RECORD).then_some(index)
}

/// The slot of the frame in a current-frame word: from the tag on x86-64,
/// else from the frame's place (`frame` is `untag(word)`, non-null and
/// alive).
#[inline(always)]
pub(crate) fn slot_of(word: *mut AsyncStackFrame, frame: &AsyncStackFrame) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        let _ = frame;
        (word.addr() >> crate::record::current::SLOT_SHIFT) as u32
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = word;
        own(frame.place.load(crate::shim::Ordering::Relaxed))
    }
}

/// Whether a child at `place` is still where it was, polled in the task of
/// `key` by the frame in slot `parent_slot`: one compare on the poll path.
#[inline(always)]
pub(crate) fn holds(place: u64, key: u64, parent_slot: u32) -> bool {
    place & !OWN_MASK == key | u64::from(parent_slot) << PARENT_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_keys_are_never_zero() {
        let k = key(12_345, 678);
        let p = child(k, 7, 3);
        assert_eq!((own(p), parent(p), key_of(p)), (7, 3, k));
        assert_eq!((index(p), incarnation(p)), (12_345, 678));
        assert!(!is_root(p));
        assert!(holds(p, k, 3));
        assert!(!holds(p, k, 4), "another parent slot");
        assert!(!holds(p, key(12_345, 679), 3), "another incarnation");
        assert!(!holds(0, key(0, 1), 0), "no place never holds");
        let r = root(key(UNTRACKED_RECORD - 1, (1 << INC_BITS) - 1));
        assert!(is_root(r));
        assert_eq!(own(r), 0);
        assert_eq!(index(r), UNTRACKED_RECORD - 1);
        assert_eq!(incarnation(r), (1 << INC_BITS) - 1);
        for parent in [0, 1, NO_SLOT] {
            assert!(
                !holds(r, key_of(r), parent),
                "a root never holds as a child"
            );
        }
        assert_eq!(parent(r), 0);
        assert_eq!(tracked_root(r), Some(UNTRACKED_RECORD - 1));
        assert_eq!(tracked_root(root(key(0, 1))), Some(0));
        assert_eq!(tracked_root(root(UNTRACKED)), None);
        assert_eq!(tracked_root(p), None);
        for (own, parent) in [(1, 0), (NO_SLOT, 0), (1, NO_SLOT), (NO_SLOT, NO_SLOT)] {
            let c = child(key(UNTRACKED_RECORD - 1, 1), own, parent);
            assert_eq!(tracked_root(c), None, "a child at {own} under {parent}");
            assert!(holds(c, key(UNTRACKED_RECORD - 1, 1), parent));
        }
        assert_eq!(tracked_root(0), None);
        assert_ne!(key(0, 1), 0);
    }
}
