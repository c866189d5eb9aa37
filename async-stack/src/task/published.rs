//! A task's **published stack**: the copy of its async stack that other
//! threads read.
//!
//! Walking the live frame chain from another thread would read a linked
//! list while its owner mutates it, and report stacks that never existed
//! (see the py-spy `--nonblocking` seed). Instead, the thread polling a task
//! keeps this table of atomic words up to date, and readers copy it whole
//! under a sequence counter.
//!
//! # Slots
//!
//! Every frame of the task holds a **slot** of the table from the first poll
//! it gets under the task until it completes, is dropped, or is polled under
//! another parent or task (see [`crate::record::frame`], "Links"). The slot's word
//! is the frame's call site, the `.await` it last reached, and its parent's
//! slot; beside it sits the frame's *birth*, a number taken from the task
//! slot when the frame got its slot, increasing for the life of the process
//! (never reset when the task slot is reused). So the table holds the tree
//! of the task's live frames whether or not they were polled recently: the
//! pending branches of a `join!`, and the children of a
//! `FuturesUnordered` that were not woken in the task's last poll.
//!
//! In the steady state a poll writes nothing here but [`polled`]: the
//! address of the frame being polled right now (null between polls). That
//! word *is* the polling thread's current frame while the task's poll runs
//! (see [`crate::record::current`]), so keeping it costs a frame nothing beyond
//! linking itself: one store on entry, one on exit. Readers map it to a
//! slot through the frame address each slot records when it is taken.
//! Addresses are identities here, compared and never dereferenced by a
//! reader.
//!
//! # Protocol
//!
//! - **One writer**: the thread polling the task, which holds `&mut` to the
//!   task's root future and so to every frame it owns. It never takes a
//!   lock and does no read-modify-write. Slots, words and births change only
//!   inside a *section*: `seq` to odd, the stores, `seq` to even. Sections
//!   are rare: a frame taking or giving back its slot, moving to another
//!   `.await`, or changing parent.
//! - **Foreign retirements**: a frame of this task dropped (or re-linked)
//!   by another thread, outside this task's poll (a `Shared` future, a
//!   future handed to another task), must not write the table. It stores its
//!   birth in its slot's `retire` word and raises `retire_pending`; the
//!   writer checks that flag once per task poll and frees each slot whose
//!   birth matches its retire word. Births are unique per task slot, so a
//!   late retirement can never free a later frame's slot.
//! - **Readers** copy `live`, `polled`, `overflow` and the live slots
//!   between two loads of `seq`, and retry (a bounded number of times,
//!   counted) when `seq` was odd or changed. They then rebuild the tree from
//!   the parent links: pre-order, siblings in birth order, which is source
//!   order for the branches of a `join!` even when the combinator polls them
//!   in rotation (as `tokio::join!` does). A returned copy is one that
//!   existed at one instant.
//! - Words are interned ids ([`crate::record::site`]), never pointers.
//!
//! [`polled`]: PublishedStack::polled

use crate::record::frame::AsyncStackFrame;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};

/// Number of frames of one task a published stack holds. A frame that first
/// polls while every slot is taken (or under a frame that holds none) is not
/// shown for as long as it lives, and is counted in the task's
/// `truncated`.
pub const STACK_CAPACITY: usize = if cfg!(async_stack_loom) { 4 } else { 64 };

const _: () = assert!(STACK_CAPACITY <= 64, "`live` is one 64-bit mask");

const AWAIT_BITS: u32 = 32;
const CALL_BITS: u32 = 23;
const CALL_SHIFT: u32 = AWAIT_BITS;
const DEPTH_SHIFT: u32 = AWAIT_BITS + CALL_BITS; // 55
const DEPTH_MASK: u64 = 0xff;

/// One decoded entry: a frame's call site and await site, and, in a
/// reader's copy, its depth in the tree (the root is 0).
///
/// The same layout serves the published words, whose top byte holds the
/// parent's slot plus one (`0`: no parent) instead of a depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) depth: u32,
    pub(crate) call_site: u32,
    pub(crate) await_site: u32,
}

impl Entry {
    #[inline(always)]
    pub(crate) fn encode(depth: u32, call_site: u32, await_site: u32) -> u64 {
        let depth = u64::from(depth.min(DEPTH_MASK as u32));
        let call = u64::from(call_site.min((1 << CALL_BITS) - 1));
        (depth << DEPTH_SHIFT) | (call << CALL_SHIFT) | u64::from(await_site)
    }

    /// `word` with its await-site id replaced by `await_site`.
    #[inline(always)]
    pub(crate) fn with_await(word: u64, await_site: u32) -> u64 {
        (word & !0xffff_ffff) | u64::from(await_site)
    }

    /// `key` (an entry encoded with depth 0) with `top` in its top byte.
    #[inline(always)]
    pub(crate) fn with_depth(key: u64, top: u32) -> u64 {
        (key & !(DEPTH_MASK << DEPTH_SHIFT))
            | (u64::from(top.min(DEPTH_MASK as u32)) << DEPTH_SHIFT)
    }

    /// A published word: `key` under the frame in slot `parent`.
    #[inline(always)]
    pub(crate) fn published(key: u64, parent: Option<u32>) -> u64 {
        Entry::with_depth(key, parent.map_or(0, |p| p + 1))
    }

    /// The parent slot of a published word.
    fn parent_of(word: u64) -> Option<u32> {
        (Entry::decode(word).depth).checked_sub(1)
    }

    pub(crate) fn decode(word: u64) -> Entry {
        Entry {
            depth: ((word >> DEPTH_SHIFT) & DEPTH_MASK) as u32,
            call_site: ((word >> CALL_SHIFT) & ((1 << CALL_BITS) - 1)) as u32,
            await_site: (word & 0xffff_ffff) as u32,
        }
    }
}

/// The slot of copied entry `i`: `slots[i]`, or `i` when `slots` is empty
/// (the entries were slots `0..n`).
fn slot_of(slots: &[u8], i: usize) -> u32 {
    slots.get(i).map_or(i as u32, |&s| u32::from(s))
}

/// A reader's copy of a published stack, as a tree in pre-order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StackCopy {
    /// Entry words ([`Entry::encode`], with depths), at most
    /// [`STACK_CAPACITY`], in pre-order with siblings in birth order.
    pub(crate) words: Vec<u64>,
    /// The birth of each entry's frame.
    pub(crate) births: Vec<u32>,
    /// Scratch: the frame address of each copied slot, in slot order.
    addrs: Vec<usize>,
    /// Number of live frames (greater than `words.len()` when some hold no
    /// slot).
    pub(crate) len: u32,
    /// While a poll runs: the index in `words` of the frame being polled.
    pub(crate) active: Option<u32>,
    /// Scratch: the slot of each copied word when they are not `0..n`.
    slots: Vec<u8>,
}

impl StackCopy {
    /// The slot of the copied frame at address `addr` (none for `0`, or for
    /// a frame that holds no slot). A frame's address is unique among the
    /// live frames of its task; should a stale `polled` value match a
    /// later frame at the same address, the youngest is taken.
    fn slot_at(&self, addr: usize) -> Option<u32> {
        if addr == 0 {
            return None;
        }
        (0..self.addrs.len())
            .filter(|&i| self.addrs[i] == addr)
            .max_by_key(|&i| self.births[i])
            .map(|i| slot_of(&self.slots, i))
    }

    /// Which entries are inside their poll right now, as a bit mask (bit
    /// `i` for entry `i`; entries never exceed 64): the active frame and its
    /// ancestors, found from the depths since entries are pre-order.
    pub(crate) fn running_mask(&self) -> u64 {
        let Some(active) = self.active else {
            return 0;
        };
        let Some(&w) = self.words.get(active as usize) else {
            return 0;
        };
        let mut depth = Entry::decode(w).depth;
        let mut mask = 1u64 << active;
        for i in (0..active as usize).rev() {
            let d = Entry::decode(self.words[i]).depth;
            if d < depth {
                mask |= 1 << i;
                depth = d;
            }
        }
        mask
    }

    /// Turns the copied slots (published words and births, in slot order;
    /// `slots` names them, or is empty for slots `0..n`) into the pre-order
    /// tree in `words` and `births`, and maps `active_slot` to its index.
    /// `addrs` is not used.
    ///
    /// A frame's parent is the frame in its parent slot if that one is live
    /// and older; otherwise (its parent is gone, or never had a slot) the
    /// frame hangs under the oldest parentless frame, the root.
    fn build_tree(&mut self, active_slot: Option<u32>) {
        self.addrs.clear();
        self.active = None;
        let n = self.words.len();
        if n == 0 {
            return;
        }
        // The usual stack, a plain chain (each frame, in slot order, born
        // after and under the one before): only depths to fill in.
        let chain = self
            .words
            .first()
            .is_some_and(|&w| Entry::parent_of(w).is_none())
            && (1..n).all(|i| {
                self.births[i - 1] < self.births[i]
                    && Entry::parent_of(self.words[i]) == Some(slot_of(&self.slots, i - 1))
            });
        if chain {
            for i in 0..n {
                let e = Entry::decode(self.words[i]);
                self.words[i] = Entry::encode(i as u32, e.call_site, e.await_site);
                if Some(slot_of(&self.slots, i)) == active_slot {
                    self.active = Some(i as u32);
                }
            }
            return;
        }
        const NONE: u8 = u8::MAX;
        // (slot, word, birth), in birth order.
        let mut raw: Vec<(u32, u64, u32)> = (0..n)
            .map(|i| (slot_of(&self.slots, i), self.words[i], self.births[i]))
            .collect();
        raw.sort_unstable_by_key(|&(_, _, birth)| birth);
        // Slot -> index in `raw` (birth order).
        let mut index_of = [NONE; 64];
        for (i, &(slot, _, _)) in raw.iter().enumerate() {
            index_of[slot as usize] = i as u8;
        }
        // Children lists, built in birth order so each is sorted.
        let mut first_child = [NONE; 64];
        let mut last_child = [NONE; 64];
        let mut next_sibling = [NONE; 64];
        let mut roots = 0usize;
        for i in 0..n {
            let (_, word, birth) = raw[i];
            let parent = Entry::parent_of(word)
                .and_then(|p| index_of.get(p as usize).copied())
                .filter(|&p| p != NONE && raw[p as usize].2 < birth);
            let parent = match parent {
                Some(p) => p as usize,
                // The oldest parentless frame is the root (index 0 in birth
                // order has no older parent, so it always gets here first).
                None if roots == 0 => {
                    roots = 1;
                    continue;
                }
                None => 0,
            };
            if first_child[parent] == NONE {
                first_child[parent] = i as u8;
            } else {
                next_sibling[last_child[parent] as usize] = i as u8;
            }
            last_child[parent] = i as u8;
        }
        self.words.clear();
        self.births.clear();
        // Iterative pre-order walk from the root (index 0).
        let mut stack = [(0u8, 0u32); 64];
        let mut top = 1;
        while top > 0 {
            top -= 1;
            let (i, depth) = stack[top];
            let (slot, word, birth) = raw[i as usize];
            if Some(slot) == active_slot {
                self.active = Some(self.words.len() as u32);
            }
            let e = Entry::decode(word);
            self.words
                .push(Entry::encode(depth, e.call_site, e.await_site));
            self.births.push(birth);
            // Push the children in reverse so the oldest comes out first.
            let mut kids = [0u8; 64];
            let mut k = 0;
            let mut c = first_child[i as usize];
            while c != NONE {
                kids[k] = c;
                k += 1;
                c = next_sibling[c as usize];
            }
            for &c in kids[..k].iter().rev() {
                stack[top] = (c, depth + 1);
                top += 1;
            }
        }
    }
}

/// The published stack of one task. `#[repr(C)]` for debugger scripts.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct PublishedStack {
    seq: AtomicU64,
    /// Bit `i` set: slot `i` holds a live frame (sections only).
    live: AtomicU64,
    /// The frame being polled (null between polls): while the task's poll
    /// runs, the polling thread's current frame (see [`crate::record::current`]),
    /// written on every entry and exit of a frame, outside sections.
    pub(crate) polled: AtomicPtr<AsyncStackFrame>,
    /// Live frames that hold no slot (sections only).
    overflow: AtomicU32,
    /// Raised by a foreign retirement; checked once per task poll (beside
    /// `polled`, which the poll writes anyway).
    retire_pending: AtomicU32,
    words: [AtomicU64; STACK_CAPACITY],
    births: [AtomicU32; STACK_CAPACITY],
    /// The address of each slot's frame (sections only), to find the slot
    /// of the `polled` frame.
    addrs: [AtomicUsize; STACK_CAPACITY],
    /// Foreign retirements: the birth of the frame that should give this
    /// slot back (see the module docs). Read by the writer only.
    retire: [AtomicU32; STACK_CAPACITY],
}

/// A copy raced with the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Torn;

impl PublishedStack {
    pub(crate) fn new() -> Self {
        PublishedStack {
            seq: AtomicU64::new(0),
            live: AtomicU64::new(0),
            polled: AtomicPtr::new(std::ptr::null_mut()),
            overflow: AtomicU32::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            births: std::array::from_fn(|_| AtomicU32::new(0)),
            addrs: std::array::from_fn(|_| AtomicUsize::new(0)),
            retire_pending: AtomicU32::new(0),
            retire: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// Asks the processor to bring the lines a reader copies for a short
    /// stack (the first words and births) into the cache.
    #[inline]
    pub(crate) fn prefetch(&self) {
        crate::sync::prefetch(std::ptr::from_ref(&self.words[0]).cast());
        crate::sync::prefetch(std::ptr::from_ref(&self.words[STACK_CAPACITY.min(8) - 1]).cast());
        crate::sync::prefetch(std::ptr::from_ref(&self.births[0]).cast());
    }

    #[inline(always)]
    fn begin(&self) -> u64 {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // Order the odd `seq` before the data stores below.
        fence(Ordering::Release);
        s
    }

    #[inline(always)]
    fn end(&self, s: u64) {
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Writer: empties the table for a new task. `polled` is already null
    /// (the last poll cleared it), and a leftover retirement only costs the
    /// new task one scan that frees nothing (births are never reused).
    pub(crate) fn reset(&self) {
        if self.live.load(Ordering::Relaxed) | u64::from(self.overflow.load(Ordering::Relaxed)) != 0
        {
            let s = self.begin();
            self.live.store(0, Ordering::Relaxed);
            self.overflow.store(0, Ordering::Relaxed);
            self.end(s);
        }
    }

    /// Writer: gives the frame at `addr`, born `birth`, a slot holding
    /// `word`, or counts it as not shown (`None`) when every slot is taken.
    #[cold]
    #[inline(never)]
    pub(crate) fn take(&self, word: u64, birth: u32, addr: usize) -> Option<u32> {
        let live = self.live.load(Ordering::Relaxed);
        let slot = live.trailing_ones() as usize;
        let s = self.begin();
        let taken = if slot < STACK_CAPACITY {
            self.words[slot].store(word, Ordering::Relaxed);
            self.births[slot].store(birth, Ordering::Relaxed);
            self.addrs[slot].store(addr, Ordering::Relaxed);
            self.live.store(live | 1 << slot, Ordering::Relaxed);
            Some(slot as u32)
        } else {
            self.count_hidden(true);
            None
        };
        self.end(s);
        taken
    }

    /// Writer: counts a live frame that holds no slot (its parent holds
    /// none).
    #[cold]
    #[inline(never)]
    pub(crate) fn hide(&self) {
        let s = self.begin();
        self.count_hidden(true);
        self.end(s);
    }

    /// Inside a section: one more (`true`) or one fewer live frame without
    /// a slot.
    #[inline(always)]
    fn count_hidden(&self, more: bool) {
        let n = self.overflow.load(Ordering::Relaxed);
        let n = if more {
            n.saturating_add(1)
        } else {
            n.saturating_sub(1)
        };
        self.overflow.store(n, Ordering::Relaxed);
    }

    /// Writer: a frame gives back its slot (`None`: it held none).
    #[cold]
    #[inline(never)]
    pub(crate) fn give_back(&self, slot: Option<u32>) {
        let s = self.begin();
        match slot {
            Some(slot) => {
                let live = self.live.load(Ordering::Relaxed);
                self.live
                    .store(live & !(1u64 << (slot % 64)), Ordering::Relaxed);
            }
            None => self.count_hidden(false),
        }
        self.end(s);
    }

    /// Writer: slot `slot` must read `word` (its frame has a new parent).
    #[cold]
    #[inline(never)]
    pub(crate) fn set_word(&self, slot: u32, word: u64) {
        if let Some(w) = self.words.get(slot as usize)
            && w.load(Ordering::Relaxed) != word
        {
            let s = self.begin();
            w.store(word, Ordering::Relaxed);
            self.end(s);
        }
    }

    /// Writer: the await-site bits of slot `slot` must read `await_site`
    /// (a running frame moved on to another `.await`).
    #[inline(always)]
    pub(crate) fn set_await(&self, slot: u32, await_site: u32) {
        if let Some(w) = self.words.get(slot as usize) {
            let old = w.load(Ordering::Relaxed);
            let word = Entry::with_await(old, await_site);
            if old != word {
                self.set_word(slot, word);
            }
        }
    }

    /// Any thread but the writer: the frame born `birth` no longer holds
    /// slot `slot`; the writer frees it at its next poll.
    #[cold]
    #[inline(never)]
    pub(crate) fn retire(&self, slot: u32, birth: u32) {
        if let Some(r) = self.retire.get(slot as usize) {
            r.store(birth, Ordering::Relaxed);
            self.retire_pending.store(1, Ordering::Release);
        }
    }

    /// Writer, once per task poll: frees the slots retired by other threads.
    #[inline(always)]
    pub(crate) fn collect_retired(&self) {
        if self.retire_pending.load(Ordering::Relaxed) != 0 {
            self.collect_retired_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn collect_retired_slow(&self) {
        // Take the flag before reading the words: a retirement stored after
        // this point raises it again for the next poll, and the swap reads
        // (and synchronises with) every one stored before.
        if self.retire_pending.swap(0, Ordering::AcqRel) == 0 {
            return;
        }
        let live = self.live.load(Ordering::Relaxed);
        let mut keep = live;
        for slot in 0..STACK_CAPACITY {
            if live & (1 << slot) != 0
                && self.retire[slot].load(Ordering::Relaxed)
                    == self.births[slot].load(Ordering::Relaxed)
            {
                keep &= !(1 << slot);
            }
        }
        if keep != live {
            let s = self.begin();
            self.live.store(keep, Ordering::Relaxed);
            self.end(s);
        }
    }

    /// Reader: copies the stack into `out`, as a tree.
    pub(crate) fn copy_into(&self, out: &mut StackCopy) -> Result<(), Torn> {
        out.words.clear();
        out.births.clear();
        out.addrs.clear();
        out.slots.clear();
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            return Err(Torn);
        }
        let live = self.live.load(Ordering::Relaxed) & (u64::MAX >> (64 - STACK_CAPACITY));
        let overflow = self.overflow.load(Ordering::Relaxed);
        let polled = self.polled.load(Ordering::Relaxed) as usize;
        if live & live.wrapping_add(1) == 0 {
            // Slots `0..n`, the usual case: straight copies.
            let n = live.trailing_ones() as usize;
            out.words
                .extend(self.words[..n].iter().map(|w| w.load(Ordering::Relaxed)));
            out.births
                .extend(self.births[..n].iter().map(|b| b.load(Ordering::Relaxed)));
            if polled != 0 {
                out.addrs
                    .extend(self.addrs[..n].iter().map(|a| a.load(Ordering::Relaxed)));
            }
        } else {
            let mut bits = live;
            while bits != 0 {
                let slot = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                out.words.push(self.words[slot].load(Ordering::Relaxed));
                out.births.push(self.births[slot].load(Ordering::Relaxed));
                if polled != 0 {
                    out.addrs.push(self.addrs[slot].load(Ordering::Relaxed));
                }
                out.slots.push(slot as u8);
            }
        }
        // Order the loads above before the second `seq` load.
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != s1 {
            out.words.clear();
            out.births.clear();
            return Err(Torn);
        }
        out.len = (out.words.len() as u32).saturating_add(overflow);
        let active = out.slot_at(polled);
        out.build_tree(active);
        Ok(())
    }
}

/// Tests: a made-up address for the frame born `birth` (`0`: none).
#[cfg(test)]
fn fake_addr(birth: u32) -> usize {
    birth as usize * 0x40
}

#[cfg(test)]
impl PublishedStack {
    /// Tests: the frame born `birth` is being polled (`0`: no poll runs).
    fn poll_birth(&self, birth: u32) {
        self.polled.store(
            std::ptr::without_provenance_mut(fake_addr(birth)),
            Ordering::Relaxed,
        );
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A reader copying while the writer gives a root and a child their
    /// slots, moves the child to another `.await`, polls it, and gives the
    /// child's slot back never gets a mix of two moments: every accepted
    /// copy is one of the states the writer passed through.
    #[test]
    fn copy_is_never_torn() {
        loom::model(|| {
            let stack = Arc::new(PublishedStack::new());
            let w = stack.clone();
            let root = Entry::published(Entry::encode(0, 1, 0), None);
            let child = Entry::published(Entry::encode(0, 2, 7), Some(0));
            let writer = loom::thread::spawn(move || {
                w.take(root, 1, fake_addr(1)).unwrap();
                w.poll_birth(1);
                let c = w.take(child, 2, fake_addr(2)).unwrap();
                w.poll_birth(2);
                w.set_await(c, 8);
                w.poll_birth(1);
                w.give_back(Some(c));
                w.poll_birth(0);
            });
            let a = Entry::encode(0, 1, 0);
            let b = Entry::encode(1, 2, 7);
            let b2 = Entry::encode(1, 2, 8);
            let mut out = StackCopy::default();
            if stack.copy_into(&mut out).is_ok() {
                let states: [&[u64]; 5] = [&[], &[a], &[a, b], &[a, b2], &[a]];
                assert!(
                    states.contains(&out.words.as_slice()),
                    "torn copy {:x?}",
                    out.words,
                );
                assert!(out.active.is_none_or(|i| (i as usize) < out.words.len()));
            }
            writer.join().unwrap();
        });
    }

    /// A retirement from another thread racing with the writer's collection
    /// is never lost, and never frees the slot of a frame born later.
    #[test]
    fn retirement_is_collected_once_and_only_for_its_frame() {
        loom::model(|| {
            let stack = Arc::new(PublishedStack::new());
            let root = Entry::published(Entry::encode(0, 1, 0), None);
            let old = stack.take(root, 1, fake_addr(1)).unwrap();
            let shared = stack
                .take(Entry::published(root, Some(old)), 2, fake_addr(2))
                .unwrap();
            let s = stack.clone();
            let foreign = loom::thread::spawn(move || s.retire(shared, 2));
            stack.collect_retired();
            foreign.join().unwrap();
            stack.collect_retired();
            assert_eq!(stack.live.load(Ordering::Relaxed), 1 << old);
            // The slot is taken again by a later frame; a stale retirement
            // of the earlier one leaves it alone.
            let again = stack
                .take(Entry::published(root, Some(old)), 3, fake_addr(3))
                .unwrap();
            assert_eq!(again, shared);
            stack.retire(again, 2);
            stack.collect_retired();
            assert_eq!(stack.live.load(Ordering::Relaxed), 1 << old | 1 << again);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(call: u32, await_site: u32) -> u64 {
        Entry::encode(0, call, await_site)
    }

    #[test]
    fn entry_round_trips_and_clamps() {
        let e = Entry::decode(Entry::encode(3, 77, 9));
        assert_eq!(
            e,
            Entry {
                depth: 3,
                call_site: 77,
                await_site: 9
            }
        );
        let big = Entry::decode(Entry::encode(10_000, u32::MAX, u32::MAX));
        assert_eq!(big.depth, 255);
        assert_eq!(big.call_site, (1 << 23) - 1);
        assert_eq!(big.await_site, u32::MAX);
        assert_eq!(
            Entry::parent_of(Entry::published(key(1, 2), Some(5))),
            Some(5)
        );
        assert_eq!(Entry::parent_of(Entry::published(key(1, 2), None)), None);
    }

    /// Gives the frame born `birth`, with call site `call` and await site
    /// `await_site`, a slot under the frame in slot `parent`.
    fn put(s: &PublishedStack, call: u32, await_site: u32, parent: Option<u32>, birth: u32) -> u32 {
        s.take(
            Entry::published(key(call, await_site), parent),
            birth,
            fake_addr(birth),
        )
        .unwrap()
    }

    fn copy(s: &PublishedStack) -> StackCopy {
        let mut out = StackCopy::default();
        s.copy_into(&mut out).unwrap();
        out
    }

    #[test]
    fn tree_is_pre_order_with_siblings_in_birth_order() {
        let s = PublishedStack::new();
        // root; two branches taken in rotated order: B (born 3, with a
        // child born 4) before A (born 2, in a higher slot).
        let root = put(&s, 10, 1, None, 1);
        let b = put(&s, 12, 0, Some(root), 3);
        let b1 = put(&s, 13, 5, Some(b), 4);
        let a = put(&s, 11, 6, Some(root), 2);
        s.poll_birth(4);
        let out = copy(&s);
        assert_eq!(
            out.words,
            [
                Entry::encode(0, 10, 1),
                Entry::encode(1, 11, 6),
                Entry::encode(1, 12, 0),
                Entry::encode(2, 13, 5),
            ]
        );
        assert_eq!(out.births, [1, 2, 3, 4]);
        assert_eq!(out.len, 4);
        assert_eq!(out.active, Some(3));
        assert_eq!(out.running_mask(), 0b1101);
        // A completes: its slot is given back, and taken by a new frame.
        s.give_back(Some(a));
        let c = put(&s, 14, 0, Some(b1), 5);
        assert_eq!(c, a, "the lowest free slot is reused");
        s.poll_birth(0);
        let out = copy(&s);
        assert_eq!(out.births, [1, 3, 4, 5]);
        assert_eq!(Entry::decode(out.words[3]).depth, 3);
        assert_eq!(out.active, None);
        assert_eq!(out.running_mask(), 0);
    }

    #[test]
    fn polled_frame_is_found_by_address() {
        let s = PublishedStack::new();
        let root = put(&s, 1, 0, None, 1);
        let child = put(&s, 2, 0, Some(root), 2);
        // A frame that holds no slot, or an address no slot records: the
        // task runs, but no frame is marked.
        s.poll_birth(9);
        assert_eq!(copy(&s).active, None);
        s.poll_birth(2);
        assert_eq!(copy(&s).active, Some(1));
        assert_eq!(copy(&s).running_mask(), 0b11);
        // The child was dropped on another thread (its retirement not yet
        // collected) and a new frame at the same address took a slot: the
        // younger one is the polled one.
        s.take(Entry::published(key(3, 0), Some(root)), 3, fake_addr(2))
            .unwrap();
        let out = copy(&s);
        assert_eq!(out.births, [1, 2, 3]);
        assert_eq!(out.active, Some(2));
        let _ = child;
    }

    #[test]
    fn orphans_hang_under_the_root() {
        let s = PublishedStack::new();
        let root = put(&s, 1, 0, None, 1);
        let gone = put(&s, 2, 0, Some(root), 2);
        let kept = put(&s, 3, 0, Some(gone), 3);
        s.give_back(Some(gone));
        // A later frame takes the parent's slot: it is younger than `kept`,
        // so it is not taken for its parent.
        let young = put(&s, 4, 0, Some(root), 4);
        assert_eq!(young, gone);
        let out = copy(&s);
        let depths: Vec<u32> = out.words.iter().map(|&w| Entry::decode(w).depth).collect();
        assert_eq!(out.births, [1, 3, 4]);
        assert_eq!(depths, [0, 1, 1]);
        let _ = kept;
    }

    #[test]
    fn frames_beyond_capacity_are_counted() {
        let s = PublishedStack::new();
        let mut parent = None;
        for i in 0..(STACK_CAPACITY as u32 + 5) {
            let slot = s.take(
                Entry::published(key(i + 1, 0), parent),
                i + 1,
                fake_addr(i + 1),
            );
            assert_eq!(slot.is_some(), (i as usize) < STACK_CAPACITY);
            parent = slot.or(parent);
        }
        let out = copy(&s);
        assert_eq!(out.len as usize, STACK_CAPACITY + 5);
        assert_eq!(out.words.len(), STACK_CAPACITY);
        for _ in 0..5 {
            s.give_back(None);
        }
        s.give_back(None);
        assert_eq!(copy(&s).len as usize, STACK_CAPACITY, "never below zero");
        s.reset();
        assert_eq!(copy(&s), StackCopy::default());
    }

    #[test]
    fn steady_state_writes_no_section() {
        let s = PublishedStack::new();
        let slot = put(&s, 1, 2, None, 1);
        let seq = s.seq.load(Ordering::Relaxed);
        s.set_await(slot, 2);
        s.poll_birth(1);
        s.poll_birth(0);
        s.collect_retired();
        assert_eq!(s.seq.load(Ordering::Relaxed), seq, "no section");
        s.set_await(slot, 3);
        assert_eq!(s.seq.load(Ordering::Relaxed), seq + 2);
        assert_eq!(Entry::decode(copy(&s).words[0]).await_site, 3);
    }

    #[test]
    fn retired_slots_are_freed_at_the_next_collection() {
        let s = PublishedStack::new();
        let root = put(&s, 1, 0, None, 1);
        let child = put(&s, 2, 0, Some(root), 2);
        s.retire(child, 2);
        assert_eq!(copy(&s).words.len(), 2, "readers see it until collected");
        s.collect_retired();
        assert_eq!(copy(&s).words.len(), 1);
        // Out of range and stale retirements are ignored.
        s.retire(STACK_CAPACITY as u32, 2);
        s.retire(root, 99);
        s.collect_retired();
        assert_eq!(copy(&s).words.len(), 1);
    }
}
