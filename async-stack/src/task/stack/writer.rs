//! The published stack's **writer**: sections, slots taken and freed by
//! the polling thread, and retirements by foreign threads (see
//! [`crate::task::stack`] for the protocol).

use crate::record::current::NO_SLOT;
use crate::record::site::SiteId;
use crate::shim::{AtomicU64, Ordering, fence};
use crate::task::record::layout::TaskRecord;
use crate::task::registry;
use crate::task::stack::words::{
    DIR_ENTRIES, HEAD_SLOTS, INLINE_SLOTS, Meta, dir_get, foreign, locate, meta, word,
};

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

    /// Inside a section.
    fn set_meta(&self, m: Meta) {
        self.meta.store(meta::pack(m), Ordering::Relaxed);
    }

    /// The writer: the word of slot `slot`, allocating the chunks it lives
    /// in (outside any section: a chunk is zeroed before it is named).
    /// `None` if the pool is exhausted.
    #[inline]
    fn slot_word_or_alloc(&self, slot: u32) -> Option<&AtomicU64> {
        match self.slot_word(slot) {
            Some(w) => Some(w),
            None => self.alloc_slot_word(slot),
        }
    }

    /// [`slot_word_or_alloc`](Self::slot_word_or_alloc) for a slot whose
    /// chunk does not exist yet.
    #[cold]
    #[inline(never)]
    fn alloc_slot_word(&self, slot: u32) -> Option<&AtomicU64> {
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
    pub(crate) fn start_stack(&self, site: SiteId) {
        let birth = self.next_birth();
        self.reset_stack(word::pack(site, NO_SLOT, birth), 1);
    }

    /// The writer, for a task spawned and not polled yet (see
    /// `root::preregister`): a stack without frames, slot 0 clear. Its
    /// root's first poll then starts it ([`start_stack`](Self::start_stack)).
    pub(crate) fn empty_stack(&self) {
        self.reset_stack(0, 0);
    }

    /// One section: slot 0 holds `root`, every other slot under the old
    /// top is cleared, and `top` is the new top, with the foreign counters
    /// taken as seen.
    fn reset_stack(&self, root: u64, top: u32) {
        let f = self.foreign.load(Ordering::Acquire);
        let old = self.meta();
        let s = self.begin();
        self.slots[0].store(root, Ordering::Relaxed);
        for slot in 1..old.top {
            if let Some(w) = self.slot_word(slot) {
                w.store(0, Ordering::Relaxed);
            }
        }
        self.set_meta(Meta {
            hidden: 0,
            seen_hidden_retired: foreign::hidden_retired(f),
            seen_version: foreign::version(f),
            top,
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
    /// chunk can be had); the caller then counts it hidden. Inlined into
    /// its one caller, the (cold) move of a frame to a new place.
    #[inline]
    pub(crate) fn take(&self, site: SiteId, parent: u32) -> Option<u32> {
        // Read once: only this writer changes `meta`, and nothing below
        // does until the section.
        let mut m = self.meta();
        let top = m.top;
        let slot = (1..top.min(INLINE_SLOTS as u32))
            .find(|&s| {
                self.slot_word(s)
                    .is_some_and(|w| w.load(Ordering::Relaxed) == 0)
            })
            .or_else(|| self.free_chunk_slot(top))
            .or((top.max(1) < NO_SLOT).then_some(top.max(1)))?;
        let w = self.slot_word_or_alloc(slot)?;
        let birth = self.next_birth();
        let s = self.begin();
        w.store(word::pack(site, parent, birth), Ordering::Relaxed);
        m.top = m.top.max(slot + 1);
        self.set_meta(m);
        self.end(s);
        Some(slot)
    }

    /// [`take`](Self::take)'s search past the record's own slots: the
    /// lowest free slot of the chunks under `top`.
    #[inline]
    fn free_chunk_slot(&self, top: u32) -> Option<u32> {
        if top as usize <= INLINE_SLOTS {
            return None;
        }
        self.free_chunk_slot_slow(top)
    }

    /// [`free_chunk_slot`](Self::free_chunk_slot), a chunk at a time.
    #[cold]
    #[inline(never)]
    fn free_chunk_slot_slow(&self, top: u32) -> Option<u32> {
        self.slot_words(INLINE_SLOTS as u32, top)
            .find(|(_, w)| w.load(Ordering::Relaxed) == 0)
            .map(|(s, _)| s)
    }

    /// The writer: the birth of the frame in `slot` (`0`: the slot has no
    /// word).
    pub(crate) fn birth_of(&self, slot: u32) -> u32 {
        self.slot_word(slot)
            .map_or(0, |w| word::birth(w.load(Ordering::Relaxed)))
    }

    /// The writer: the ancestry (see [`ancestry`](super::ancestry)) of a
    /// frame whose parent is in slot `parent`, folded from the record's
    /// words, each read once, the parent's first; `0` if a word is missing
    /// or the parents do not end at a root within a stack's depth.
    pub(crate) fn ancestry_from(&self, parent: u32) -> u64 {
        let mut digest = super::ancestry::START;
        let mut s = parent;
        for _ in 0..=NO_SLOT {
            let Some(w) = self.slot_word(s) else {
                return 0;
            };
            let w = w.load(Ordering::Relaxed);
            digest = super::ancestry::step(digest, word::site(w), word::birth(w));
            s = word::parent(w);
            if s == NO_SLOT {
                return super::ancestry::done(digest);
            }
        }
        0
    }

    /// The writer: the frame in `slot` now shows `site` (it reached
    /// another `.await`). No section when nothing changes.
    #[inline]
    pub(crate) fn set_site(&self, slot: u32, site: SiteId) {
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

    /// The writer: the frame in `slot` gives it back. Inlined into the
    /// (cold) release of a place.
    #[inline]
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
    #[inline]
    fn has_children(&self, slot: u32, top: u32) -> bool {
        self.slot_words(0, top).any(|(t, w)| {
            let w = w.load(Ordering::Relaxed);
            t != slot && w != 0 && word::parent(w) == slot
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
        // Most often the parent is live and the slot the topmost: no
        // zombie to free, and `top` comes down by one or more.
        let parent = word::parent(old);
        if self
            .slot_word(parent)
            .is_some_and(|p| p.load(Ordering::Relaxed) & word::ZOMBIE != 0)
        {
            self.free_zombies_from(parent);
        }
        // Below the top, a free slot leaves `top` as it is: the slot under
        // it is still in use, or was freed by `free_zombies_from`, which
        // lowered `top` then.
        if slot + 1 >= top {
            self.shrink_top();
        }
    }

    /// Inside a section: frees `slot` and its ancestors while each is a
    /// zombie without children, then lowers `top` past what it freed.
    fn free_zombies_from(&self, mut slot: u32) {
        let top = self.meta().top;
        let mut freed = false;
        while slot != NO_SLOT {
            let Some(w) = self.slot_word(slot) else {
                break;
            };
            let old = w.load(Ordering::Relaxed);
            if old & word::ZOMBIE == 0 || self.has_children(slot, top) {
                break;
            }
            w.store(0, Ordering::Relaxed);
            freed = true;
            slot = word::parent(old);
        }
        if freed {
            self.shrink_top();
        }
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
        for (slot, w) in self.slot_words(0, top) {
            if w.load(Ordering::Relaxed) & word::RETIRED != 0 {
                self.release_in_section(slot);
            }
        }
        let mut m = self.meta();
        let retired = foreign::hidden_retired(f).wrapping_sub(m.seen_hidden_retired) & 0xffff;
        m.hidden = m.hidden.saturating_sub(retired as u32);
        m.seen_hidden_retired = foreign::hidden_retired(f);
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
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use std::task::Waker;

    use super::*;
    use crate::task::end;
    use crate::task::stack::reader::StackCopy;

    /// The slots in use, as `(slot, parent, zombie)`, and `top`.
    fn slots(r: &TaskRecord) -> (Vec<(u32, u32, bool)>, u32) {
        let top = r.meta().top;
        let used = (0..NO_SLOT)
            .filter_map(|s| {
                let w = r.slot_word(s)?.load(Ordering::Relaxed);
                (w != 0).then(|| (s, word::parent(w), w & word::ZOMBIE != 0))
            })
            .collect();
        (used, top)
    }

    /// A record taken for a task whose stack holds only its root, and the
    /// site its frames are at.
    fn new_task() -> (u32, &'static TaskRecord, SiteId) {
        let index = registry::alloc_record().expect("a free record");
        let r = registry::record(index).unwrap();
        r.refs.store(1, Ordering::Relaxed);
        // SAFETY: a free record: `refs` was 0 and the cell holds no waker.
        unsafe { r.put_waker(Waker::noop().clone()) };
        let site = SiteId::call(1);
        r.start_stack(site);
        (index, r, site)
    }

    /// Slots are taken lowest first and given back in any order; `top`
    /// stays one past the highest slot in use, through zombies (a frame
    /// gone while frames below it live) and holes below the top.
    #[test]
    fn top_stays_one_past_the_highest_slot_in_use() {
        let (index, r, site) = new_task();
        let root = (0, NO_SLOT, false);

        // A chain of three under the root, the third in the head chunk.
        let a = r.take(site, 0).unwrap();
        let b = r.take(site, a).unwrap();
        let c = r.take(site, b).unwrap();
        assert_eq!((a, b, c), (1, 2, 3));
        // The two upper ones end first: zombies, while `c` names `b`.
        r.release(a);
        r.release(b);
        assert_eq!(
            slots(r),
            (vec![root, (1, 0, true), (2, 1, true), (3, 2, false)], 4)
        );
        // The last one takes both zombies with it.
        r.release(c);
        assert_eq!(slots(r), (vec![root], 1));

        // A hole below the top keeps `top`; the next frame fills it.
        let x = r.take(site, 0).unwrap();
        let y = r.take(site, 0).unwrap();
        r.release(x);
        assert_eq!(slots(r), (vec![root, (2, 0, false)], 3));
        let z = r.take(site, 0).unwrap();
        assert_eq!(z, 1);
        r.release(y);
        assert_eq!(slots(r), (vec![root, (1, 0, false)], 2));

        // A zombie left childless by a move goes, and `top` with it.
        let p = r.take(site, z).unwrap();
        let q = r.take(site, p).unwrap();
        r.release(p);
        assert_eq!(
            slots(r),
            (vec![root, (1, 0, false), (2, 1, true), (3, 2, false)], 4)
        );
        r.set_parent(q, z);
        assert_eq!(slots(r), (vec![root, (1, 0, false), (3, 1, false)], 4));
        r.release(q);
        r.release(z);
        assert_eq!(slots(r), (vec![root], 1));

        end::end_task_in(r, index);
    }

    /// Across chunks (the searches go a chunk at a time): a full stack
    /// refuses the next frame; freed slots in the head chunk and in two
    /// directory chunks are taken again lowest first; a frame whose only
    /// child lives in a later chunk stays a zombie until that child ends;
    /// and a copy reads every slot under `top`.
    #[test]
    fn a_full_stack_is_searched_across_its_chunks() {
        let (index, r, site) = new_task();

        let taken: Vec<u32> = (1..NO_SLOT).map(|_| r.take(site, 0).unwrap()).collect();
        assert_eq!(taken, (1..NO_SLOT).collect::<Vec<_>>());
        assert_eq!(r.take(site, 0), None, "every slot is taken");

        // Slot 5 (head chunk), 20 and 50 (directory chunks 1 and 5).
        for s in [50, 5, 20] {
            r.release(s);
        }
        assert_eq!(
            [0; 4].map(|_| r.take(site, 0)),
            [Some(5), Some(20), Some(50), None]
        );

        // Slot 2 (in the record) names its only child in slot 60.
        r.release(60);
        assert_eq!(r.take(site, 2), Some(60));
        r.release(2);
        let (used, top) = slots(r);
        assert_eq!(top, NO_SLOT);
        assert!(used.contains(&(2, 0, true)), "{used:?}");
        r.release(60);
        let (used, top) = slots(r);
        assert_eq!((used.len(), top), (NO_SLOT as usize - 2, NO_SLOT));
        assert!(!used.iter().any(|&(s, ..)| s == 2 || s == 60), "{used:?}");

        let mut copy = StackCopy::default();
        r.copy_raw(&mut copy).unwrap();
        assert_eq!(copy.raw.len(), NO_SLOT as usize);
        let free: Vec<usize> = (0..copy.raw.len()).filter(|&s| copy.raw[s] == 0).collect();
        assert_eq!(free, [2, 60]);

        end::end_task_in(r, index);
    }
}
