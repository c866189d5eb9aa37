//! A task's **published stack**: the tree of its live frames, kept in its
//! record for other threads to copy.
//!
//! Walking the live frame chain from another thread would read a linked
//! list while its owner mutates it, and report stacks that never existed
//! (see the py-spy `--nonblocking` seed). Instead the thread polling a task
//! keeps this table of atomic words up to date, and readers copy it whole
//! under a sequence counter.
//!
//! # Slots
//!
//! Every frame of the task holds a **slot** from the first poll it gets in
//! the task until it completes, is dropped, or is polled in another task
//! (its *place*, see [`crate::task::place`]). Slot 0 is the task root's.
//! A slot's word ([`word`]) holds the frame's current site (its call site,
//! or the `.await` it last reached), its parent's slot, and its *birth*, a
//! number that orders siblings (the branches of a `join!` in source order,
//! even when the combinator polls them in rotation). Slots 0 to 2 live in
//! the record; slots 3 to 6 in a head chunk, which also holds the indices
//! of up to seven more chunks of eight slots, up to [`STACK_CAPACITY`]
//! slots. Chunks come from a pool that is never freed, and go back to it
//! when the task ends. A frame that finds every slot taken, or whose parent
//! holds none, holds no slot: it is counted in the task's hidden frames.
//!
//! A frame that gives its slot back while frames below it still name it as
//! their parent leaves a **zombie**: the slot stays taken, and neither it
//! nor anything below it is shown, until its last child is gone. So a slot
//! is never taken again while a word still names it as a parent, and a
//! reader never hangs a frame under a stranger.
//!
//! In the steady state a poll writes nothing here: the running frame is in
//! the record's `current` word (see [`crate::record::current`]).
//!
//! # Protocol
//!
//! - **One writer**, the thread polling the task. It takes no lock and does
//!   no read-modify-write. Words, `meta`, `births`, `chunk` and the chunks'
//!   directories change only inside a *section*: `seq` to odd, a release
//!   fence, the stores, `seq` to even, a release fence. Sections are rare:
//!   a frame taking or giving back its slot, moving to another `.await`,
//!   changing parent, and foreign retirements being collected.
//! - **Foreign retirements**: a frame of the task that is dropped, or
//!   polled by another task, on another thread than the task's poll, must
//!   leave the tree at once (a `Shared` future polled by two tasks shows in
//!   the second only), but cannot write a section. It enters the record's
//!   [`foreign`] word by compare-and-swap, which succeeds only while the
//!   word still holds the frame's incarnation, so a frame that outlives its
//!   task never touches the next one; it then sets the `RETIRED` bit of its
//!   word by compare-and-swap (or, holding no slot, counts itself in the
//!   word's hidden-retirement count), and leaves the word, bumping its
//!   version. The writer frees retired slots at its next poll. Ending a
//!   task waits for the foreign section count to be zero, then moves the
//!   word to the next incarnation, so no foreign section ever straddles
//!   two tasks.
//! - **Readers** copy the slots between two loads of `seq` and of
//!   `foreign`, and retry (a bounded number of times, counted) when `seq`
//!   was odd, a foreign section was open, or either moved. The copy is
//!   therefore one instant of the table, foreign retirements included.
//!   Readers then build the tree: pre-order from slot 0, siblings in birth
//!   order, without the retired and zombie slots and what hangs below them
//!   (those live frames are counted as hidden).
//! - Words are interned ids ([`crate::record::site`]), never pointers.

use crate::sync::{AtomicU64, Ordering, fence};
use crate::task::place::NO_SLOT;
use crate::task::record::TaskRecord;
use crate::task::registry::{self, Chunk};

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
/// | 0..25 | site: an interned call-site id, or an await-site id with bit 24 set |
/// | 25..31 | the parent's slot ([`NO_SLOT`] for the root) |
/// | 31..62 | birth |
/// | 62 | zombie: the frame is gone, frames below still name it |
/// | 63 | retired by a foreign thread, not yet freed by the writer |
pub(crate) mod word {
    use crate::record::site::SITE_ID_BITS;

    /// Set in a site field that holds an await-site id.
    pub(crate) const AWAIT: u32 = 1 << SITE_ID_BITS;
    const SITE_MASK: u64 = (1 << (SITE_ID_BITS + 1)) - 1;
    pub(crate) const PARENT_SHIFT: u32 = SITE_ID_BITS + 1;
    pub(crate) const BIRTH_SHIFT: u32 = PARENT_SHIFT + 6;
    pub(crate) const BIRTH_MASK: u32 = (1 << 31) - 1;
    pub(crate) const ZOMBIE: u64 = 1 << 62;
    pub(crate) const RETIRED: u64 = 1 << 63;

    #[inline]
    pub(crate) fn pack(site: u32, parent: u32, birth: u32) -> u64 {
        (u64::from(site) & SITE_MASK)
            | (u64::from(parent & 0x3f) << PARENT_SHIFT)
            | (u64::from(birth & BIRTH_MASK) << BIRTH_SHIFT)
    }

    #[inline]
    pub(crate) fn site(w: u64) -> u32 {
        (w & SITE_MASK) as u32
    }

    #[inline]
    pub(crate) fn with_site(w: u64, site: u32) -> u64 {
        (w & !SITE_MASK) | (u64::from(site) & SITE_MASK)
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
    pub(crate) const SEEN_HIDDEN_SHIFT: u32 = 30;
    const SEEN_VERSION_SHIFT: u32 = 46;
    pub(crate) const TOP_SHIFT: u32 = 58;

    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub(crate) struct Meta {
        /// Live frames without a slot.
        pub(crate) hidden: u32,
        /// `foreign`'s hidden-retirement count when last collected.
        pub(crate) seen_hidden: u64,
        /// `foreign`'s version when last collected.
        pub(crate) seen_version: u64,
        /// One past the highest slot in use.
        pub(crate) top: u32,
    }

    pub(crate) fn unpack(m: u64) -> Meta {
        Meta {
            hidden: (m & HIDDEN_MASK) as u32,
            seen_hidden: (m >> SEEN_HIDDEN_SHIFT) & 0xffff,
            seen_version: (m >> SEEN_VERSION_SHIFT) & 0xfff,
            top: (m >> TOP_SHIFT) as u32,
        }
    }

    pub(crate) fn pack(m: Meta) -> u64 {
        u64::from(m.hidden).min(HIDDEN_MASK)
            | (m.seen_hidden & 0xffff) << SEEN_HIDDEN_SHIFT
            | (m.seen_version & 0xfff) << SEEN_VERSION_SHIFT
            | u64::from(m.top) << TOP_SHIFT
    }
}

pub(crate) use meta::Meta;

/// Where slot `slot` lives: `Ok(index)` in the record, or in a chunk
/// (`Err((directory entry or None for the head, index in the chunk))`).
#[inline]
fn locate(slot: u32) -> Result<usize, (Option<u32>, usize)> {
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
fn dir_get(head: &Chunk, entry: u32) -> u32 {
    let w = head.words[(HEAD_SLOTS + entry / 2) as usize].load(Ordering::Relaxed);
    (w >> (32 * (entry % 2))) as u32
}

/// Lets another thread run: the one whose foreign section a writer waits
/// for (under loom, the model's scheduler).
fn yield_now() {
    #[cfg(not(async_stack_loom))]
    std::thread::yield_now();
    #[cfg(async_stack_loom)]
    loom::thread::yield_now();
}

impl TaskRecord {
    // ---- sections (the writer) ----

    #[inline]
    fn begin(&self) -> u32 {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd `seq` before the stores of the section.
        fence(Ordering::Release);
        s
    }

    #[inline]
    fn end(&self, s: u32) {
        self.seq.store(s.wrapping_add(2), Ordering::Release);
        // Orders the section before the writer's next store of `current`:
        // a reader that sees a frame run in a slot taken here also sees
        // that the section happened.
        fence(Ordering::Release);
    }

    fn meta(&self) -> Meta {
        meta::unpack(self.meta.load(Ordering::Relaxed))
    }

    /// Inside a section.
    fn set_meta(&self, m: Meta) {
        self.meta.store(meta::pack(m), Ordering::Relaxed);
    }

    /// The word of slot `slot`, if the chunk it lives in exists. Any
    /// thread: chunks are never freed; what a reader finds there is
    /// validated by its copy's counters and the record's id.
    #[inline]
    fn slot_word(&self, slot: u32) -> Option<&AtomicU64> {
        match self.slots.get(slot as usize) {
            Some(w) => Some(w),
            None => self.chunk_slot_word(slot),
        }
    }

    /// [`slot_word`](Self::slot_word) past the record's own slots.
    #[inline(never)]
    fn chunk_slot_word(&self, slot: u32) -> Option<&AtomicU64> {
        match locate(slot) {
            Ok(i) => self.slots.get(i),
            Err((entry, i)) => {
                let head = registry::chunk(self.chunk.load(Ordering::Relaxed))?;
                let chunk = match entry {
                    None => head,
                    Some(e) if e < DIR_ENTRIES => registry::chunk(dir_get(head, e))?,
                    Some(_) => return None,
                };
                chunk.words.get(i)
            }
        }
    }

    /// The writer: the word of slot `slot`, allocating the chunks it lives
    /// in (outside any section: a chunk is zeroed before it is named).
    /// `None` if the pool is exhausted.
    fn slot_word_or_alloc(&self, slot: u32) -> Option<&AtomicU64> {
        if let Some(w) = self.slot_word(slot) {
            return Some(w);
        }
        let (entry, _) = locate(slot).err()?;
        let mut head = self.chunk.load(Ordering::Relaxed);
        if head == 0 {
            head = registry::alloc_chunk()?;
            let s = self.begin();
            self.chunk.store(head, Ordering::Relaxed);
            self.end(s);
        }
        if let Some(e) = entry {
            let head = registry::chunk(head)?;
            if dir_get(head, e) == 0 {
                let c = registry::alloc_chunk()?;
                let w = &head.words[(HEAD_SLOTS + e / 2) as usize];
                let shift = 32 * (e % 2);
                let s = self.begin();
                let old = w.load(Ordering::Relaxed) & !(0xffff_ffff << shift);
                w.store(old | u64::from(c) << shift, Ordering::Relaxed);
                self.end(s);
            }
        }
        self.slot_word(slot)
    }

    /// The writer, for a new task: a stack that holds only its root, at
    /// `site`, in slot 0, with the foreign counters taken as seen. One
    /// section.
    pub(crate) fn start_stack(&self, site: u32) {
        let f = self.foreign.load(Ordering::Acquire);
        let old = self.meta();
        let birth = self.next_birth();
        let s = self.begin();
        self.slots[0].store(word::pack(site, NO_SLOT, birth), Ordering::Relaxed);
        for slot in 1..old.top {
            if let Some(w) = self.slot_word(slot) {
                w.store(0, Ordering::Relaxed);
            }
        }
        self.set_meta(Meta {
            hidden: 0,
            seen_hidden: foreign::hidden_retired(f),
            seen_version: foreign::version(f),
            top: 1,
        });
        self.end(s);
    }

    /// The next birth (the writer).
    fn next_birth(&self) -> u32 {
        let b = self.births.load(Ordering::Relaxed).wrapping_add(1);
        self.births.store(b, Ordering::Relaxed);
        b
    }

    /// The writer: a frame at `site` takes the lowest free slot under the
    /// frame in slot `parent`. `None` when every slot is taken (or no
    /// chunk can be had); the caller then counts it hidden.
    pub(crate) fn take(&self, site: u32, parent: u32) -> Option<u32> {
        let top = self.meta().top;
        let slot = (1..top)
            .find(|&s| {
                self.slot_word(s)
                    .is_some_and(|w| w.load(Ordering::Relaxed) == 0)
            })
            .or((top.max(1) < NO_SLOT).then_some(top.max(1)))?;
        let w = self.slot_word_or_alloc(slot)?;
        let birth = self.next_birth();
        let s = self.begin();
        w.store(word::pack(site, parent, birth), Ordering::Relaxed);
        let mut m = self.meta();
        m.top = m.top.max(slot + 1);
        self.set_meta(m);
        self.end(s);
        Some(slot)
    }

    /// The writer: the frame in `slot` now shows `site` (it reached
    /// another `.await`). No section when nothing changes.
    #[inline]
    pub(crate) fn set_site(&self, slot: u32, site: u32) {
        if let Some(w) = self.slot_word(slot) {
            let old = w.load(Ordering::Relaxed);
            let new = word::with_site(old, site);
            if old != new {
                let s = self.begin();
                w.store(new, Ordering::Relaxed);
                self.end(s);
            }
        }
    }

    /// The writer: the frame in `slot` is now polled by the frame in slot
    /// `parent`. Its old parent, if a zombie left childless, goes.
    pub(crate) fn set_parent(&self, slot: u32, parent: u32) {
        let Some(w) = self.slot_word(slot) else {
            return;
        };
        let old = w.load(Ordering::Relaxed);
        if word::parent(old) == parent {
            return;
        }
        let s = self.begin();
        w.store(word::with_parent(old, parent), Ordering::Relaxed);
        self.free_zombies_from(word::parent(old));
        self.end(s);
    }

    /// The writer: the frame in `slot` gives it back.
    pub(crate) fn release(&self, slot: u32) {
        let s = self.begin();
        self.release_in_section(slot);
        self.end(s);
    }

    /// The writer: one more (`true`) or one fewer frame without a slot.
    pub(crate) fn count_hidden(&self, more: bool) {
        let s = self.begin();
        let mut m = self.meta();
        m.hidden = if more {
            m.hidden.saturating_add(1)
        } else {
            m.hidden.saturating_sub(1)
        };
        self.set_meta(m);
        self.end(s);
    }

    /// Whether a live word names `slot` as its parent.
    fn has_children(&self, slot: u32, top: u32) -> bool {
        (0..top).any(|t| {
            t != slot
                && self.slot_word(t).is_some_and(|w| {
                    let w = w.load(Ordering::Relaxed);
                    w != 0 && word::parent(w) == slot
                })
        })
    }

    /// Inside a section: `slot` is given back: a zombie if frames below
    /// still name it, else free, and then its zombie ancestors left
    /// without children go too.
    fn release_in_section(&self, slot: u32) {
        let Some(w) = self.slot_word(slot) else {
            return;
        };
        let old = w.load(Ordering::Relaxed);
        if old == 0 {
            return;
        }
        let top = self.meta().top;
        if self.has_children(slot, top) {
            w.store((old & !word::RETIRED) | word::ZOMBIE, Ordering::Relaxed);
            return;
        }
        w.store(0, Ordering::Relaxed);
        self.free_zombies_from(word::parent(old));
        self.shrink_top();
    }

    /// Inside a section: frees `slot` and its ancestors while each is a
    /// zombie without children.
    fn free_zombies_from(&self, mut slot: u32) {
        let top = self.meta().top;
        while slot != NO_SLOT {
            let Some(w) = self.slot_word(slot) else {
                return;
            };
            let old = w.load(Ordering::Relaxed);
            if old & word::ZOMBIE == 0 || self.has_children(slot, top) {
                return;
            }
            w.store(0, Ordering::Relaxed);
            slot = word::parent(old);
        }
        self.shrink_top();
    }

    /// Inside a section: lowers `top` past free slots.
    fn shrink_top(&self) {
        let mut m = self.meta();
        while m.top > 0
            && self
                .slot_word(m.top - 1)
                .is_none_or(|w| w.load(Ordering::Relaxed) == 0)
        {
            m.top -= 1;
        }
        self.set_meta(m);
    }

    /// The writer, once per task poll: frees the slots retired by foreign
    /// threads and folds their hidden-frame retirements into the count.
    #[inline(always)]
    pub(crate) fn collect_foreign(&self) {
        let f = self.foreign.load(Ordering::Acquire);
        let m = self.meta.load(Ordering::Relaxed);
        if foreign::version(f) != meta::unpack(m).seen_version {
            self.collect_foreign_slow(f);
        }
    }

    #[cold]
    #[inline(never)]
    fn collect_foreign_slow(&self, f: u64) {
        let s = self.begin();
        let top = self.meta().top;
        for slot in 0..top {
            if self
                .slot_word(slot)
                .is_some_and(|w| w.load(Ordering::Relaxed) & word::RETIRED != 0)
            {
                self.release_in_section(slot);
            }
        }
        let mut m = self.meta();
        let retired = foreign::hidden_retired(f).wrapping_sub(m.seen_hidden) & 0xffff;
        m.hidden = m.hidden.saturating_sub(retired as u32);
        m.seen_hidden = foreign::hidden_retired(f);
        m.seen_version = foreign::version(f);
        self.set_meta(m);
        self.end(s);
    }

    // ---- foreign threads ----

    /// Any thread but the writer's poll: the frame that holds `slot` (or
    /// no slot, `NO_SLOT`) in incarnation `inc` leaves the task. Does
    /// nothing if that task has ended.
    pub(crate) fn retire(&self, inc: u32, slot: u32) {
        let mut f = self.foreign.load(Ordering::Acquire);
        loop {
            if foreign::incarnation(f) != inc {
                return;
            }
            if foreign::open(f) == foreign::MAX_OPEN {
                std::hint::spin_loop();
                f = self.foreign.load(Ordering::Acquire);
                continue;
            }
            match self.foreign.compare_exchange_weak(
                f,
                f + foreign::OPEN_ONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => f = actual,
            }
        }
        // Orders the open section before the word's change: a reader that
        // sees the retired bit also sees the section.
        fence(Ordering::Release);
        // The incarnation cannot end while the section is open, so the
        // slot is still this frame's.
        let hidden = slot == NO_SLOT;
        if let Some(w) = (!hidden).then(|| self.slot_word(slot)).flatten() {
            let mut cur = w.load(Ordering::Relaxed);
            while cur != 0 && cur & word::RETIRED == 0 {
                match w.compare_exchange_weak(
                    cur,
                    cur | word::RETIRED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(actual) => cur = actual,
                }
            }
        }
        let mut f = self.foreign.load(Ordering::Relaxed);
        loop {
            match self.foreign.compare_exchange_weak(
                f,
                foreign::closed(f, hidden),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => f = actual,
            }
        }
    }

    /// The thread ending the task: moves the record to its next
    /// incarnation once no foreign section is open (they are a few
    /// instructions long), and returns it. From then on no frame of the
    /// ended task touches the record.
    ///
    /// When no frame but the root holds a place in the incarnation (no
    /// slot above the root's in use, none hidden, no section open), no
    /// foreign thread can be retiring one: only a frame with a place
    /// retires, and a slot stays in use, or a hidden frame counted, until
    /// this writer frees it. Nothing else writes the word then, and a
    /// store moves it on, which saves the compare-and-swap (a locked
    /// instruction) at the end of most tasks. `meta` is the writer's: the
    /// thread ending the task is the one that polled it last, or one the
    /// task's future was handed to since.
    pub(crate) fn close_incarnation(&self) -> u32 {
        let mut f = self.foreign.load(Ordering::Acquire);
        let m = self.meta();
        if m.top <= 1 && m.hidden == 0 && foreign::open(f) == 0 {
            let next = foreign::incarnation(f).wrapping_add(1);
            self.foreign
                .store(foreign::with_incarnation(f, next), Ordering::Release);
            return next;
        }
        let mut spins = 0u32;
        loop {
            if foreign::open(f) != 0 {
                spins += 1;
                // Under loom the model must be told to run the thread
                // whose section is open.
                if spins.is_multiple_of(64) || cfg!(async_stack_loom) {
                    yield_now();
                } else {
                    std::hint::spin_loop();
                }
                f = self.foreign.load(Ordering::Acquire);
                continue;
            }
            let next = foreign::incarnation(f).wrapping_add(1);
            match self.foreign.compare_exchange_weak(
                f,
                foreign::with_incarnation(f, next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return next,
                Err(actual) => f = actual,
            }
        }
    }

    /// The thread ending the task: gives the task's chunks back to the
    /// pool (after [`close_incarnation`](Self::close_incarnation), so no
    /// foreign section can touch them).
    #[inline]
    pub(crate) fn release_chunks(&self) {
        let head = self.chunk.load(Ordering::Relaxed);
        if head != 0 {
            self.release_chunks_from(head);
        }
    }

    #[cold]
    #[inline(never)]
    fn release_chunks_from(&self, head: u32) {
        let Some(head_chunk) = registry::chunk(head) else {
            return;
        };
        let s = self.begin();
        for e in 0..DIR_ENTRIES {
            let c = dir_get(head_chunk, e);
            if c != 0 {
                registry::free_chunk(c);
            }
        }
        self.chunk.store(0, Ordering::Relaxed);
        let mut m = self.meta();
        m.top = m.top.min(INLINE_SLOTS as u32);
        self.set_meta(m);
        self.end(s);
        registry::free_chunk(head);
    }

    // ---- readers ----

    /// Copies the raw stack into `out` (words by slot), with the `meta`
    /// and `foreign` words it was read with. Called inside
    /// [`TaskRecord::read`]'s window: the caller validates the copy.
    pub(crate) fn copy_raw(&self, out: &mut StackCopy) -> Result<(), Torn> {
        out.raw.clear();
        let m = self.meta();
        out.meta = m;
        for slot in 0..m.top.min(NO_SLOT) {
            let w = self.slot_word(slot).ok_or(Torn)?;
            out.raw.push(w.load(Ordering::Relaxed));
        }
        Ok(())
    }
}

/// What a signal handler copied of the published stack of the task its
/// thread is polling: the raw words, and what [`StackCopy::build`] needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SignalCopy {
    pub(crate) words: [u64; STACK_CAPACITY],
    pub(crate) len: u32,
    pub(crate) meta: u64,
    pub(crate) foreign: u64,
}

impl TaskRecord {
    /// Copies the published stack into `out` from a signal handler on the
    /// thread that polls this task: no allocation, no lock, no retry. The
    /// interrupted thread is the only writer of sections, so an odd `seq`
    /// means it was interrupted inside one and nothing consistent can be
    /// read (`Err`); otherwise the table cannot change under the handler,
    /// except by foreign retirements, which the caller's `foreign` word
    /// accounts for as it does for any reader.
    pub(crate) fn copy_in_signal(&self, out: &mut SignalCopy) -> Result<(), Torn> {
        let s1 = self.seq.load(Ordering::Relaxed);
        if s1 & 1 == 1 {
            return Err(Torn);
        }
        let f1 = self.foreign.load(Ordering::Acquire);
        if foreign::open(f1) != 0 {
            return Err(Torn);
        }
        let m = self.meta.load(Ordering::Relaxed);
        let top = meta::unpack(m).top.min(NO_SLOT);
        for slot in 0..top {
            let w = self.slot_word(slot).ok_or(Torn)?;
            out.words[slot as usize] = w.load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        if self.foreign.load(Ordering::Relaxed) != f1 {
            return Err(Torn);
        }
        out.len = top;
        out.meta = m;
        out.foreign = f1;
        Ok(())
    }
}

impl StackCopy {
    /// The tree of a [`SignalCopy`], with the slot that ran (from the
    /// current-frame word the handler read).
    pub(crate) fn build_from_signal(&mut self, c: &SignalCopy, running_slot: u32) {
        self.raw.clear();
        self.raw
            .extend_from_slice(&c.words[..(c.len as usize).min(STACK_CAPACITY)]);
        self.meta = meta::unpack(c.meta);
        self.build(running_slot, c.foreign);
    }
}

impl StackCopy {
    /// The site ids on the path from the root to `frames[end]`, root
    /// first, appended to `out`: in pre-order, each ancestor is the
    /// nearest earlier frame one level up.
    #[inline]
    pub(crate) fn path_sites(&self, end: usize, out: &mut Vec<u32>) {
        let Some(last) = self.frames.get(end) else {
            return;
        };
        if last.depth as usize == end {
            // Depths grow by at most one from a frame to the next, so every
            // frame before this one is its ancestor (the usual chain).
            out.extend(self.frames[..=end].iter().map(|f| f.site));
            return;
        }
        let start = out.len();
        let mut want = last.depth;
        for f in self.frames[..=end].iter().rev() {
            if f.depth == want {
                out.push(f.site);
                if want == 0 {
                    break;
                }
                want -= 1;
            }
        }
        out[start..].reverse();
    }
}

/// A copy raced with a writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Torn;

/// One shown frame of a copied stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CopiedFrame {
    /// Depth in the tree; the root is 0.
    pub(crate) depth: u32,
    /// The site field of its word (see [`word`]).
    pub(crate) site: u32,
    /// Inside its poll right now.
    pub(crate) running: bool,
    /// The frame being polled right now (the innermost running one).
    pub(crate) innermost: bool,
}

/// A reader's copy of a published stack.
#[derive(Clone, Debug, Default)]
pub(crate) struct StackCopy {
    /// Shown frames in pre-order, siblings in birth order.
    pub(crate) frames: Vec<CopiedFrame>,
    /// Live frames not in `frames`: without a slot, or below a zombie or
    /// a retired frame.
    pub(crate) hidden: u32,
    /// Scratch: the copied words, by slot.
    pub(crate) raw: Vec<u64>,
    /// The `meta` word the copy was taken with.
    pub(crate) meta: Meta,
}

impl StackCopy {
    /// Builds `frames` and `hidden` from the copied words, the slot of the
    /// frame being polled (`NO_SLOT`: none, or one without a slot), and the
    /// `foreign` word of the copy.
    pub(crate) fn build(&mut self, running_slot: u32, f: u64) {
        self.frames.clear();
        let n = self.raw.len();
        let unseen = foreign::hidden_retired(f).wrapping_sub(self.meta.seen_hidden) & 0xffff;
        let without_slot = self.meta.hidden.saturating_sub(unseen as u32);
        let root_ok = self
            .raw
            .first()
            .is_some_and(|&w| word::shown(w) && word::parent(w) == NO_SLOT);
        // The usual stack, a plain chain (each slot under the one before,
        // all shown): only depths to fill in.
        let chain = root_ok
            && (1..n).all(|i| {
                let w = self.raw[i];
                word::shown(w) && word::parent(w) == i as u32 - 1
            });
        if chain {
            let running = (running_slot as usize) < n;
            self.frames.extend((0..n).map(|i| CopiedFrame {
                depth: i as u32,
                site: word::site(self.raw[i]),
                running: running && i <= running_slot as usize,
                innermost: i == running_slot as usize,
            }));
            self.hidden = without_slot;
            return;
        }
        let live = self.raw.iter().filter(|&&w| word::shown(w)).count() as u32;
        if !root_ok {
            self.hidden = without_slot.saturating_add(live);
            return;
        }
        const NONE: u8 = u8::MAX;
        // Children lists, each in birth order (insertion sort: a slot has
        // few children and lists are short).
        let mut first_child = [NONE; 64];
        let mut next_sibling = [NONE; 64];
        for s in 1..n {
            let w = self.raw[s];
            let p = word::parent(w) as usize;
            if w == 0 || p >= n || p == s || self.raw[p] == 0 {
                continue;
            }
            let birth = word::birth(w);
            let (mut prev, mut cur) = (NONE, first_child[p]);
            while cur != NONE && word::born_before(word::birth(self.raw[cur as usize]), birth) {
                prev = cur;
                cur = next_sibling[cur as usize];
            }
            next_sibling[s] = cur;
            if prev == NONE {
                first_child[p] = s as u8;
            } else {
                next_sibling[prev as usize] = s as u8;
            }
        }
        // Pre-order walk from the root, into shown frames only: a zombie
        // or retired slot hides its whole subtree. `visited` cuts cycles.
        let mut visited = 0u64;
        let mut parent_of = [NONE; 64];
        let mut slot_of = [0u8; 64];
        let mut stack = [(0u8, 0u32); 64];
        let mut top = 1;
        while top > 0 {
            top -= 1;
            let (s, depth) = stack[top];
            let s = s as usize;
            if visited & (1 << s) != 0 || !word::shown(self.raw[s]) {
                continue;
            }
            visited |= 1 << s;
            slot_of[self.frames.len()] = s as u8;
            self.frames.push(CopiedFrame {
                depth,
                site: word::site(self.raw[s]),
                running: false,
                innermost: s == running_slot as usize,
            });
            // Children pushed in reverse birth order, so the oldest comes
            // out first.
            let mut kids = [0u8; 64];
            let mut k = 0;
            let mut c = first_child[s];
            while c != NONE && k < kids.len() {
                kids[k] = c;
                parent_of[c as usize] = s as u8;
                k += 1;
                c = next_sibling[c as usize];
            }
            for &c in kids[..k].iter().rev() {
                if top < stack.len() {
                    stack[top] = (c, depth + 1);
                    top += 1;
                }
            }
        }
        // The running path: the polled frame and its ancestors.
        if (running_slot as usize) < n && visited & (1 << running_slot) != 0 {
            let mut on_path = 0u64;
            let mut s = running_slot as usize;
            loop {
                on_path |= 1 << s;
                let p = parent_of[s];
                if s == 0 || p == NONE || on_path & (1 << p) != 0 {
                    break;
                }
                s = p as usize;
            }
            for (i, f) in self.frames.iter_mut().enumerate() {
                f.running = on_path & (1 << slot_of[i]) != 0;
            }
        }
        self.hidden = without_slot.saturating_add(live - visited.count_ones());
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use crate::record::current::Active;
    use crate::sync::Ordering;
    use crate::task::TaskState::{Idle, Running, Scheduled};
    use crate::task::loom_support::{
        CHILD, OTHER, ROOT, bounded_model, end_poll, enter_child, frame, leave_child, start_poll,
        task, view,
    };
    use crate::task::{place, root};

    /// A reader copying while the writer polls a task, gives a child a
    /// slot, runs it, moves it to an `.await`, runs the root again and
    /// frees the child, never gets a mix of two moments: state, frames and
    /// running marks are always those of one instant of the poll.
    #[test]
    fn a_copy_is_one_instant_of_a_poll() {
        loom::model(|| {
            let t = task(&ROOT, 1);
            let child = frame(&CHILD);
            let writer = loom::thread::spawn(move || {
                let a = Active::new();
                let seen = start_poll(t, &a);
                let restore = enter_child(child, &a);
                leave_child(&a, restore);
                place::unlink(child.place.swap(0, Ordering::Relaxed), Some(&a));
                end_poll(t, &a, seen);
            });
            let (r, c) = (ROOT.id(), CHILD.id());
            if let Some((id, state, frames)) = view(t) {
                assert_eq!(id, 1);
                let allowed: &[(_, &[(u32, u32, bool)])] = &[
                    (Scheduled, &[(0, r, false)]),
                    (Running, &[(0, r, false)]),
                    (Running, &[(0, r, true)]),
                    (Running, &[(0, r, true), (1, c, false)]),
                    (Running, &[(0, r, true), (1, c, true)]),
                    (Idle, &[(0, r, false)]),
                ];
                assert!(
                    allowed.contains(&(state, &frames[..])),
                    "torn copy: {state:?} {frames:?}"
                );
            }
            writer.join().unwrap();
        });
    }

    /// Places `child` under the root of `t` with a whole poll on this
    /// thread, and leaves the task idle.
    fn place_child(
        t: crate::task::loom_support::Task,
        child: &crate::record::frame::AsyncStackFrame,
    ) {
        let a = Active::new();
        let seen = start_poll(t, &a);
        let restore = enter_child(child, &a);
        leave_child(&a, restore);
        end_poll(t, &a, seen);
    }

    /// A frame dropped on another thread leaves its task's tree at once,
    /// whatever the writer does meanwhile (here: collecting retirements at
    /// the start of a poll), and a copy is never torn by it.
    #[test]
    fn a_frame_retired_by_another_thread_leaves_at_once() {
        loom::model(|| {
            let t = task(&ROOT, 1);
            let child = frame(&CHILD);
            place_child(t, child);
            let p = child.place.swap(0, Ordering::Relaxed);
            let dropper = loom::thread::spawn(move || place::unlink(p, None));
            let reader = loom::thread::spawn(move || view(t));
            t.record.collect_foreign();
            let (r, c) = (ROOT.id(), CHILD.id());
            if let Some((_, _, frames)) = reader.join().unwrap() {
                assert!(
                    frames == [(0, r, false), (1, c, false)] || frames == [(0, r, false)],
                    "{frames:?}"
                );
            }
            dropper.join().unwrap();
            assert_eq!(view(t).unwrap().2, [(0, r, false)]);
            t.record.collect_foreign();
            assert_eq!(view(t).unwrap().2, [(0, r, false)]);
            assert_eq!(t.record.meta().top, 1, "the slot is free again");
        });
    }

    /// A task that ends while a reader copies its non-empty stack, and a
    /// new task that takes the same record, are never mixed in one copy.
    #[test]
    fn a_reset_racing_a_copy_never_mixes_two_tasks() {
        bounded_model(2, || {
            let t = task(&ROOT, 1);
            let child = frame(&CHILD);
            place_child(t, child);
            let index = t.index;
            let ender = loom::thread::spawn(move || {
                root::end_task(place::root(t.key));
                let next = task(&OTHER, 2);
                assert_eq!(next.index, index, "the freed record is reused");
            });
            let (r, c, o) = (ROOT.id(), CHILD.id(), OTHER.id());
            if let Some((id, _, frames)) = view(t) {
                match id {
                    1 => assert_eq!(frames, [(0, r, false), (1, c, false)]),
                    2 => assert_eq!(frames, [(0, o, false)]),
                    _ => panic!("task {id}"),
                }
            }
            ender.join().unwrap();
        });
    }

    /// A task that ends with no frame but its root closes its incarnation
    /// with a store (see `close_incarnation`): a reader copying it, and the
    /// next task that takes the record, are still never mixed.
    #[test]
    fn a_root_only_task_ending_under_a_copy_is_never_mixed_with_the_next() {
        bounded_model(2, || {
            let t = task(&ROOT, 1);
            let index = t.index;
            let ender = loom::thread::spawn(move || {
                root::end_task(place::root(t.key));
                let next = task(&OTHER, 2);
                assert_eq!(next.index, index, "the freed record is reused");
            });
            let (r, o) = (ROOT.id(), OTHER.id());
            if let Some((id, _, frames)) = view(t) {
                match id {
                    1 => assert_eq!(frames, [(0, r, false)]),
                    2 => assert_eq!(frames, [(0, o, false)]),
                    _ => panic!("task {id}"),
                }
            }
            ender.join().unwrap();
        });
    }

    /// A task ends on one thread while one of its frames is dropped on
    /// another: the retirement lands in the ended task or nowhere, never in
    /// the next task of the record.
    #[test]
    fn a_retirement_racing_the_end_of_a_task_never_reaches_the_next() {
        bounded_model(2, || {
            let t = task(&ROOT, 1);
            let child = frame(&CHILD);
            place_child(t, child);
            let p = child.place.swap(0, Ordering::Relaxed);
            let dropper = loom::thread::spawn(move || place::unlink(p, None));
            root::end_task(place::root(t.key));
            let next = task(&OTHER, 2);
            dropper.join().unwrap();
            next.record.collect_foreign();
            assert_eq!(view(next).unwrap().2, [(0, OTHER.id(), false)]);
            let m = next.record.meta();
            assert_eq!((m.top, m.hidden), (1, 0), "{m:?}");
        });
    }

    /// A frame of one task polled by another task on another thread (a
    /// `Shared` future) moves from the first tree to the second: each copy
    /// shows it in one place or the other, never torn, and the first task
    /// no longer shows it once the move is done, before it polls again.
    #[test]
    fn a_frame_relinked_into_another_task_moves_whole() {
        loom::model(|| {
            let ta = task(&ROOT, 1);
            let tb = task(&OTHER, 2);
            let shared = frame(&CHILD);
            place_child(ta, shared);
            let mover = loom::thread::spawn(move || place_child(tb, shared));
            let (r, c, o) = (ROOT.id(), CHILD.id(), OTHER.id());
            if let Some((_, _, frames)) = view(ta) {
                assert!(
                    frames == [(0, r, false), (1, c, false)] || frames == [(0, r, false)],
                    "{frames:?}"
                );
            }
            mover.join().unwrap();
            assert_eq!(view(ta).unwrap().2, [(0, r, false)]);
            assert_eq!(view(tb).unwrap().2, [(0, o, false), (1, c, false)]);
            assert_eq!(
                place::record(shared.place.load(Ordering::Relaxed)),
                tb.index
            );
        });
    }
}
