//! The published stack's **words and geometry**: where each slot lives
//! (in the record, the head chunk, or a chunk of the directory), and the
//! bit layouts of the slot, `foreign` and `meta` words (see
//! [`crate::task::stack`] for the protocol).

use crate::record::current::NO_SLOT;
use crate::shim::{AtomicU64, Ordering};

/// Slots in the record itself.
pub(crate) const INLINE_SLOTS: usize = 3;
/// Slots in a task's head chunk.
pub(crate) const HEAD_SLOTS: u32 = 4;
/// Slots in each further chunk.
pub(crate) const CHUNK_SLOTS: u32 = 8;
/// Further chunks a head chunk can name.
pub(crate) const DIR_ENTRIES: u32 = 7;
const FIRST_CHUNKED: u32 = INLINE_SLOTS as u32 + HEAD_SLOTS;

/// The most frames of one task a published stack holds. A frame that first
/// polls while every slot is taken (or under a frame that holds none) is
/// not shown for as long as it stays where it is, and is counted in the
/// task's `hidden_frames`.
pub const STACK_CAPACITY: usize = (FIRST_CHUNKED + DIR_ENTRIES * CHUNK_SLOTS) as usize;

const _: () = assert!(
    STACK_CAPACITY as u32 == NO_SLOT,
    "slot numbers fit in a place"
);

/// A slot's packed word. `0`: the slot is free.
///
/// | bits | field |
/// |---|---|
/// | 0..25 | site: a [`SiteId`](crate::record::site::SiteId) (a call-site id, or an await-site id with its await bit) |
/// | 25..31 | the parent's slot ([`NO_SLOT`] for the root) |
/// | 31..62 | birth |
/// | 62 | zombie: the frame is gone, frames below still name it |
/// | 63 | retired by a foreign thread, not yet freed by the writer |
pub(crate) mod word {
    use crate::record::site::{SITE_ID_BITS, SiteId};

    const SITE_MASK: u64 = (1 << (SITE_ID_BITS + 1)) - 1;
    pub(crate) const PARENT_SHIFT: u32 = SITE_ID_BITS + 1;
    pub(crate) const BIRTH_SHIFT: u32 = PARENT_SHIFT + 6;
    pub(crate) const BIRTH_MASK: u32 = (1 << 31) - 1;
    pub(crate) const ZOMBIE: u64 = 1 << 62;
    pub(crate) const RETIRED: u64 = 1 << 63;

    #[inline]
    pub(crate) fn pack(site: SiteId, parent: u32, birth: u32) -> u64 {
        (u64::from(site.raw()) & SITE_MASK)
            | (u64::from(parent & 0x3f) << PARENT_SHIFT)
            | (u64::from(birth & BIRTH_MASK) << BIRTH_SHIFT)
    }

    #[inline]
    pub(crate) fn site(w: u64) -> u32 {
        (w & SITE_MASK) as u32
    }

    #[inline]
    pub(crate) fn with_site(w: u64, site: SiteId) -> u64 {
        (w & !SITE_MASK) | (u64::from(site.raw()) & SITE_MASK)
    }

    #[inline]
    pub(crate) fn parent(w: u64) -> u32 {
        ((w >> PARENT_SHIFT) & 0x3f) as u32
    }

    #[inline]
    pub(crate) fn with_parent(w: u64, parent: u32) -> u64 {
        (w & !(0x3f << PARENT_SHIFT)) | (u64::from(parent & 0x3f) << PARENT_SHIFT)
    }

    #[inline]
    pub(crate) fn birth(w: u64) -> u32 {
        ((w >> BIRTH_SHIFT) as u32) & BIRTH_MASK
    }

    /// Whether `a` was born before `b`, by serial-number arithmetic: right
    /// for any two frames born less than 2^30 births apart.
    #[inline]
    pub(crate) fn born_before(a: u32, b: u32) -> bool {
        let d = b.wrapping_sub(a) & BIRTH_MASK;
        d != 0 && d < 1 << 30
    }

    /// A live slot that readers show (neither zombie nor retired).
    #[inline]
    pub(crate) fn shown(w: u64) -> bool {
        w != 0 && w & (ZOMBIE | RETIRED) == 0
    }
}

/// The **ancestry** of a frame: a digest of the slot words of the frames
/// it is polled under (parent first, up to the task's root), their site
/// and birth fields. A wait records it with the `.await` that polled it
/// (see `waits::waiter`): a frame kept while the frames above it moved on
/// (a traced fn raced in `select!` on `&mut` and kept, its caller now
/// suspended at another `.await`) stays suspended where it was, and only
/// its ancestry tells that nothing awaits it any more. The writer folds
/// the record's words (`TaskRecord::ancestry_from`), a reader the frames of its
/// copy, with the same steps; the debugger scripts mirror them.
pub(crate) mod ancestry {
    /// The digest of no ancestor yet (FNV-1a's offset basis).
    pub(crate) const START: u64 = 0xcbf2_9ce4_8422_2325;

    /// Folds in the next ancestor, by its word's site and birth fields.
    #[inline]
    pub(crate) fn step(digest: u64, site: u32, birth: u32) -> u64 {
        (digest ^ (u64::from(site) | u64::from(birth) << 32)).wrapping_mul(0x0100_0000_01b3)
    }

    /// The finished digest: never `0`, which stands for "not known".
    #[inline]
    pub(crate) fn done(digest: u64) -> u64 {
        digest.max(1)
    }
}

/// The record's `foreign` word: `[incarnation:30][version:12][open:6][hidden_retired:16]`.
///
/// `open` counts the foreign sections in progress, `version` the ones that
/// ended (modulo 4096), `hidden_retired` the frames without a slot retired
/// by them (modulo 65536; the writer folds the difference into its hidden
/// count at every poll).
pub(crate) mod foreign {
    pub(crate) const HIDDEN_MASK: u64 = 0xffff;
    pub(crate) const OPEN_SHIFT: u32 = 16;
    const OPEN_MASK: u64 = 0x3f << OPEN_SHIFT;
    pub(crate) const OPEN_ONE: u64 = 1 << OPEN_SHIFT;
    const VERSION_SHIFT: u32 = 22;
    const VERSION_MASK: u64 = 0xfff << VERSION_SHIFT;
    const INC_SHIFT: u32 = 34;
    /// The word of a new record: incarnation 1, nothing open.
    pub(crate) const FIRST: u64 = 1 << INC_SHIFT;

    #[inline]
    pub(crate) fn incarnation(f: u64) -> u32 {
        (f >> INC_SHIFT) as u32
    }
    #[inline]
    pub(crate) fn open(f: u64) -> u64 {
        (f & OPEN_MASK) >> OPEN_SHIFT
    }
    #[inline]
    pub(crate) fn version(f: u64) -> u64 {
        (f & VERSION_MASK) >> VERSION_SHIFT
    }
    #[inline]
    pub(crate) fn hidden_retired(f: u64) -> u64 {
        f & HIDDEN_MASK
    }
    /// The word at incarnation `inc`, everything else kept.
    #[inline]
    pub(crate) fn with_incarnation(f: u64, inc: u32) -> u64 {
        (f & ((1 << INC_SHIFT) - 1)) | (u64::from(inc) << INC_SHIFT)
    }
    /// `f` with one foreign section closed, which retired a frame without
    /// a slot if `hidden`.
    #[inline]
    pub(crate) fn closed(f: u64, hidden: bool) -> u64 {
        let version = (version(f) + 1) << VERSION_SHIFT & VERSION_MASK;
        let hidden = (hidden_retired(f) + u64::from(hidden)) & HIDDEN_MASK;
        ((f & !(VERSION_MASK | HIDDEN_MASK)) - OPEN_ONE) | version | hidden
    }
    /// The most sections open at once (the field's width).
    pub(crate) const MAX_OPEN: u64 = 0x3f;
}

/// The record's `meta` word, written by the writer in sections:
/// `[top:6][seen_version:12][seen_hidden_retired:16][hidden:30]`.
pub(crate) mod meta {
    pub(crate) const HIDDEN_MASK: u64 = (1 << 30) - 1;
    pub(crate) const SEEN_HIDDEN_RETIRED_SHIFT: u32 = 30;
    const SEEN_VERSION_SHIFT: u32 = 46;
    pub(crate) const TOP_SHIFT: u32 = 58;

    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub(crate) struct Meta {
        /// Live frames without a slot.
        pub(crate) hidden: u32,
        /// `foreign`'s hidden-retirement count when last collected.
        pub(crate) seen_hidden_retired: u64,
        /// `foreign`'s version when last collected.
        pub(crate) seen_version: u64,
        /// One past the highest slot in use.
        pub(crate) top: u32,
    }

    pub(crate) fn unpack(m: u64) -> Meta {
        Meta {
            hidden: (m & HIDDEN_MASK) as u32,
            seen_hidden_retired: (m >> SEEN_HIDDEN_RETIRED_SHIFT) & 0xffff,
            seen_version: (m >> SEEN_VERSION_SHIFT) & 0xfff,
            top: (m >> TOP_SHIFT) as u32,
        }
    }

    pub(crate) fn pack(m: Meta) -> u64 {
        u64::from(m.hidden).min(HIDDEN_MASK)
            | (m.seen_hidden_retired & 0xffff) << SEEN_HIDDEN_RETIRED_SHIFT
            | (m.seen_version & 0xfff) << SEEN_VERSION_SHIFT
            | u64::from(m.top) << TOP_SHIFT
    }
}

pub(crate) use meta::Meta;

/// Eight stack slots, on their own cache line.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct Chunk {
    pub(crate) words: [AtomicU64; 8],
}

/// Where slot `slot` lives: `Ok(index)` in the record, or in a chunk
/// (`Err((directory entry or None for the head, index in the chunk))`).
#[inline]
pub(crate) fn locate(slot: u32) -> Result<usize, (Option<u32>, usize)> {
    if (slot as usize) < INLINE_SLOTS {
        Ok(slot as usize)
    } else if slot < FIRST_CHUNKED {
        Err((None, (slot - INLINE_SLOTS as u32) as usize))
    } else {
        let k = slot - FIRST_CHUNKED;
        Err((Some(k / CHUNK_SLOTS), (k % CHUNK_SLOTS) as usize))
    }
}

/// The directory entry `entry` of a head chunk: two per word, in words 4
/// to 7 (words 0 to 3 hold the head's slots). Index + 1, `0` for none.
#[inline]
pub(crate) fn dir_get(head: &Chunk, entry: u32) -> u32 {
    let w = head.words[(HEAD_SLOTS + entry / 2) as usize].load(Ordering::Relaxed);
    (w >> (32 * (entry % 2))) as u32
}
