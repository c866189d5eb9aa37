//! A task's **published stack**: the copy of its async stack that other
//! threads read.
//!
//! Walking the live frame chain from another thread would read a linked
//! list while its owner mutates it, and report stacks that never existed
//! (see the py-spy `--nonblocking` seed). Instead, the thread polling a task
//! keeps this array of atomic words up to date, and readers copy it whole
//! under a sequence counter.
//!
//! # Protocol
//!
//! - **One writer**: the thread currently polling the task (a task is
//!   polled by one thread at a time, since `poll` takes `&mut`). It never
//!   takes a lock and does no read-modify-write.
//! - **Entries** (the task's pending frames, a tree in pre-order: one word
//!   per frame with its depth) and `len` change only inside a *section*:
//!   `seq` to odd, the stores, `seq` to even. Sections are rare: an entry is
//!   rewritten only when it changes (a new frame at that position, or a
//!   frame that moved to another `.await`), never when a frame is polled
//!   again where it was.
//! - **Progress** within a poll is the `pos` word (packed as
//!   `active::Pos`): the index of the frame being polled (`active`), the
//!   position where the next frame would enter (`cursor`) and the active
//!   frame's depth. It is stored (release) on every poll entry and exit,
//!   outside sections: a change of `pos` alone cannot tear a copy, because
//!   a copy that saw it also saw `seq` unchanged around constant entries, or
//!   saw `seq` change and was retried.
//! - **Readers** copy `pos`, `len` and the entries between two loads of
//!   `seq`, and retry (a bounded number of times, counted) when `seq` was
//!   odd or changed. While a poll runs (`pos` non-zero) the stack is
//!   `[0, cursor)` and the running frames are `active` and its ancestors;
//!   between polls it is `[0, len)`. A returned copy is one that existed at
//!   one instant.
//! - Words are interned ids ([`crate::site`]), never pointers.
//! - Beside each entry sits its frame's *birth*: a per-task number taken on
//!   the frame's first poll. Readers order siblings by it, so the branches
//!   of a `join!` read in source order even when the combinator polls them
//!   in rotation (as `tokio::join!` does).
//!
//! A suspended task therefore shows every branch that was pending when it
//! last yielded (both arms of a `join!`), and a running task the tree it
//! has rebuilt so far in this poll, with the path it is executing now.

use crate::active::Pos;
use crate::sync::{AtomicU32, AtomicU64, Ordering, fence};

/// Number of entries a published stack holds; deeper trees are truncated
/// (and the truncation is reported).
pub const STACK_CAPACITY: usize = if cfg!(async_stack_loom) { 4 } else { 64 };

const AWAIT_BITS: u32 = 32;
const CALL_BITS: u32 = 23;
const CALL_SHIFT: u32 = AWAIT_BITS;
const DEPTH_SHIFT: u32 = AWAIT_BITS + CALL_BITS; // 55
const DEPTH_MASK: u64 = 0xff;

/// One decoded entry of a published stack.
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

    /// `key` (an entry encoded with depth 0) at `depth`.
    #[inline(always)]
    pub(crate) fn with_depth(key: u64, depth: u32) -> u64 {
        key | (u64::from(depth.min(DEPTH_MASK as u32)) << DEPTH_SHIFT)
    }

    pub(crate) fn decode(word: u64) -> Entry {
        Entry {
            depth: ((word >> DEPTH_SHIFT) & DEPTH_MASK) as u32,
            call_site: ((word >> CALL_SHIFT) & ((1 << CALL_BITS) - 1)) as u32,
            await_site: (word & 0xffff_ffff) as u32,
        }
    }
}

/// A reader's copy of a published stack.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StackCopy {
    /// Entry words, at most [`STACK_CAPACITY`].
    pub(crate) words: Vec<u64>,
    /// The birth of each entry's frame.
    pub(crate) births: Vec<u32>,
    /// Logical length (greater than `words.len()` when truncated).
    pub(crate) len: u32,
    /// While a poll runs: the index of the frame being polled.
    pub(crate) active: Option<u32>,
}

impl StackCopy {
    /// The entries' indices in pre-order with siblings sorted by birth
    /// (first poll), i.e. in source order for a `join!`'s branches.
    pub(crate) fn source_order(&self) -> Vec<usize> {
        let depth = |i: usize| Entry::decode(self.words[i]).depth;
        // A plain chain has no siblings to order: the common case, without
        // sorting.
        if self.is_plain_chain() {
            return (0..self.words.len()).collect();
        }
        // End (exclusive) of the subtree rooted at `i`.
        let end_of = |i: usize| {
            let mut j = i + 1;
            while j < self.words.len() && depth(j) > depth(i) {
                j += 1;
            }
            j
        };
        fn emit(
            first: usize,
            end: usize,
            end_of: &dyn Fn(usize) -> usize,
            births: &[u32],
            out: &mut Vec<usize>,
        ) {
            let mut roots = Vec::new();
            let mut i = first;
            while i < end {
                roots.push(i);
                i = end_of(i);
            }
            roots.sort_by_key(|&r| births.get(r).copied().unwrap_or(0));
            for r in roots {
                out.push(r);
                emit(r + 1, end_of(r), end_of, births, out);
            }
        }
        let mut out = Vec::with_capacity(self.words.len());
        emit(0, self.words.len(), &end_of, &self.births, &mut out);
        out
    }

    /// Whether the entries form a plain chain, each one level deeper than
    /// the one before, so that pre-order is already source order.
    pub(crate) fn is_plain_chain(&self) -> bool {
        self.words
            .windows(2)
            .all(|w| Entry::decode(w[1]).depth == Entry::decode(w[0]).depth + 1)
    }

    /// Which entries are inside their poll right now, as a bit mask (bit
    /// `i` for entry `i`; entries never exceed 64): the active frame and its
    /// ancestors, found from the depths since entries are pre-order.
    pub(crate) fn running_mask(&self) -> u64 {
        const _: () = assert!(STACK_CAPACITY <= 64);
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
}

/// The published stack of one task. `#[repr(C)]` for debugger scripts.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct PublishedStack {
    seq: AtomicU64,
    /// Progress of the running poll (see the module docs); `0` when idle.
    pos: AtomicU64,
    /// Length of the tree between polls (may exceed the capacity).
    len: AtomicU32,
    _pad: AtomicU32,
    words: [AtomicU64; STACK_CAPACITY],
    births: [AtomicU32; STACK_CAPACITY],
}

/// A copy raced with the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Torn;

impl PublishedStack {
    pub(crate) fn new() -> Self {
        PublishedStack {
            seq: AtomicU64::new(0),
            pos: AtomicU64::new(Pos::IDLE.0),
            len: AtomicU32::new(0),
            _pad: AtomicU32::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            births: std::array::from_fn(|_| AtomicU32::new(0)),
        }
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

    /// Writer: entry `index` must read `word`, for a frame born `birth`.
    /// Rewrites it (in a section) only if it differs.
    #[inline(always)]
    pub(crate) fn set_entry(&self, index: u32, word: u64, birth: u32) {
        let i = index as usize;
        if let (Some(w), Some(b)) = (self.words.get(i), self.births.get(i))
            && (w.load(Ordering::Relaxed) != word || b.load(Ordering::Relaxed) != birth)
        {
            self.write_entry_born(w, word, b, birth);
        }
    }

    #[cold]
    #[inline(never)]
    fn write_entry_born(&self, w: &AtomicU64, word: u64, b: &AtomicU32, birth: u32) {
        let s = self.begin();
        w.store(word, Ordering::Relaxed);
        b.store(birth, Ordering::Relaxed);
        self.end(s);
    }

    #[cold]
    #[inline(never)]
    fn write_entry(&self, w: &AtomicU64, word: u64) {
        let s = self.begin();
        w.store(word, Ordering::Relaxed);
        self.end(s);
    }

    /// Writer: the await-site bits of entry `index` must read `await_site`
    /// (a running frame moved on to another `.await`).
    #[inline(always)]
    pub(crate) fn set_await(&self, index: u32, await_site: u32) {
        if let Some(w) = self.words.get(index as usize) {
            let old = w.load(Ordering::Relaxed);
            let word = Entry::with_await(old, await_site);
            if old != word {
                self.write_entry(w, word);
            }
        }
    }

    /// Writer: progress of the running poll.
    #[inline(always)]
    pub(crate) fn set_pos(&self, pos: Pos) {
        self.pos.store(pos.0, Ordering::Release);
    }

    /// Writer: the poll ended with `len` entries pending.
    #[inline(always)]
    pub(crate) fn finish(&self, len: u32) {
        if self.len.load(Ordering::Relaxed) != len {
            let s = self.begin();
            self.len.store(len, Ordering::Relaxed);
            self.end(s);
        }
        self.pos.store(Pos::IDLE.0, Ordering::Release);
    }

    /// Reader: copies the stack into `out`.
    pub(crate) fn copy_into(&self, out: &mut StackCopy) -> Result<(), Torn> {
        out.words.clear();
        out.births.clear();
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            return Err(Torn);
        }
        let pos = Pos(self.pos.load(Ordering::Acquire));
        let (len, active) = if pos.is_idle() {
            (self.len.load(Ordering::Relaxed), None)
        } else {
            (pos.cursor(), Some(pos.active()))
        };
        let n = (len as usize).min(STACK_CAPACITY);
        out.words
            .extend(self.words[..n].iter().map(|w| w.load(Ordering::Relaxed)));
        out.births
            .extend(self.births[..n].iter().map(|b| b.load(Ordering::Relaxed)));
        // Order the loads above before the second `seq` load.
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        if s1 != s2 {
            out.words.clear();
            out.births.clear();
            return Err(Torn);
        }
        out.len = len;
        out.active = active.filter(|&a| (a as usize) < out.words.len());
        Ok(())
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A reader copying while the writer runs one poll (a root, a child
    /// that moves to another `.await`, then the end of the poll) never gets
    /// a mix of two moments: every accepted copy is one of the states the
    /// writer passed through.
    #[test]
    fn copy_is_never_torn() {
        loom::model(|| {
            let stack = Arc::new(PublishedStack::new());
            let w = stack.clone();
            let a = Entry::encode(0, 1, 0);
            let b = Entry::encode(1, 2, 7);
            let b2 = Entry::encode(1, 2, 8);
            let writer = loom::thread::spawn(move || {
                w.set_entry(0, a, 0);
                w.set_pos(Pos::at(0, 1));
                w.set_entry(1, b, 1);
                w.set_pos(Pos::at(1, 2));
                w.set_entry(1, b2, 1);
                w.set_pos(Pos::at(0, 2));
                w.finish(2);
            });
            let mut out = StackCopy::default();
            if stack.copy_into(&mut out).is_ok() {
                let states: [(&[u64], Option<u32>); 6] = [
                    (&[], None),
                    (&[a], Some(0)),
                    (&[a, b], Some(1)),
                    (&[a, b2], Some(1)),
                    (&[a, b2], Some(0)),
                    (&[a, b2], None),
                ];
                assert!(
                    states.contains(&(out.words.as_slice(), out.active)),
                    "torn copy {:x?} active {:?}",
                    out.words,
                    out.active
                );
            }
            writer.join().unwrap();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn running_view_and_idle_view() {
        let s = PublishedStack::new();
        // root(0) with two children: A (pending, with child A1) and B running.
        let words = [
            Entry::encode(0, 1, 5),
            Entry::encode(1, 2, 6),
            Entry::encode(2, 3, 7),
            Entry::encode(1, 4, 0),
        ];
        for (i, w) in words.iter().enumerate() {
            s.set_entry(i as u32, *w, i as u32);
        }
        s.set_pos(Pos::at(3, 4));
        let mut out = StackCopy::default();
        s.copy_into(&mut out).unwrap();
        assert_eq!(out.words, words);
        assert_eq!(out.active, Some(3));
        assert_eq!(out.running_mask(), 0b1001);
        // The poll ends with only the root pending: the idle view is [0, 1).
        s.finish(1);
        s.copy_into(&mut out).unwrap();
        assert_eq!(out.words, words[..1]);
        assert_eq!(out.active, None);
        assert_eq!(out.running_mask(), 0);
    }

    #[test]
    fn siblings_read_in_birth_order() {
        let s = PublishedStack::new();
        // root, then two branches polled in rotated order: B (born 3, with
        // a child) before A (born 2).
        let rows = [(0, 1), (1, 3), (2, 4), (1, 2)];
        for (i, (depth, birth)) in rows.iter().enumerate() {
            s.set_entry(i as u32, Entry::encode(*depth, 10 + i as u32, 0), *birth);
        }
        s.finish(4);
        let mut out = StackCopy::default();
        s.copy_into(&mut out).unwrap();
        assert_eq!(out.source_order(), [0, 3, 1, 2]);
    }

    #[test]
    fn truncation_beyond_capacity_is_reported() {
        let s = PublishedStack::new();
        for i in 0..(STACK_CAPACITY as u32 + 5) {
            s.set_entry(i, Entry::encode(i, 1, 0), 0);
        }
        s.finish(STACK_CAPACITY as u32 + 5);
        let mut out = StackCopy::default();
        s.copy_into(&mut out).unwrap();
        assert_eq!(out.len as usize, STACK_CAPACITY + 5);
        assert_eq!(out.words.len(), STACK_CAPACITY);
        s.finish(2);
        s.copy_into(&mut out).unwrap();
        assert_eq!(out.len, 2);
        assert_eq!(out.words.len(), 2);
    }

    #[test]
    fn unchanged_entries_are_not_rewritten() {
        let s = PublishedStack::new();
        s.set_entry(0, Entry::encode(0, 1, 2), 0);
        let seq = s.seq.load(Ordering::Relaxed);
        s.set_entry(0, Entry::encode(0, 1, 2), 0);
        s.set_await(0, 2);
        s.set_pos(Pos::at(0, 1));
        assert_eq!(
            s.seq.load(Ordering::Relaxed),
            seq,
            "steady state writes no section"
        );
        s.set_await(0, 3);
        assert_eq!(s.seq.load(Ordering::Relaxed), seq + 2);
    }
}
