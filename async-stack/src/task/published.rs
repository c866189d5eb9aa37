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
//!   polled by one thread at a time, since `poll` takes `&mut`). The writer
//!   bumps `seq` to odd, writes words, and bumps it to even. It never takes
//!   a lock and does no read-modify-write (only it writes `seq`).
//! - **Any number of readers** copy `len` and the words between two loads of
//!   `seq`. If the two loads differ, or the first is odd, the copy is torn:
//!   it is retried a bounded number of times and then dropped and counted.
//!   A returned copy is therefore one that existed at one instant.
//! - Words are interned ids ([`crate::site`]), never pointers.
//!
//! # Entries
//!
//! The array holds the task's pending frames as a tree in pre-order: each
//! entry is one frame with its depth. A frame enters at the cursor when its
//! poll starts (flagged *running*), is rewritten with its current `.await`
//! when its poll returns `Pending`, and is cut off (with its subtree) when it
//! returns `Ready`. So a suspended task shows every branch that was pending
//! when it last yielded (both arms of a `join!`), and a running task shows
//! the path it is executing now, flagged running.

use crate::sync::{AtomicU32, AtomicU64, Ordering, fence};

/// Number of entries a published stack holds; deeper trees are truncated
/// (and the truncation is reported).
pub const STACK_CAPACITY: usize = if cfg!(async_stack_loom) { 4 } else { 64 };

const AWAIT_BITS: u32 = 32;
const CALL_BITS: u32 = 23;
const CALL_SHIFT: u32 = AWAIT_BITS;
const DEPTH_SHIFT: u32 = AWAIT_BITS + CALL_BITS; // 55
const DEPTH_MASK: u64 = 0xff;
const RUNNING_BIT: u64 = 1 << 63;

/// One decoded entry of a published stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) depth: u32,
    pub(crate) call_site: u32,
    pub(crate) await_site: u32,
    pub(crate) running: bool,
}

impl Entry {
    #[inline(always)]
    pub(crate) fn encode(depth: u32, call_site: u32, await_site: u32, running: bool) -> u64 {
        let depth = u64::from(depth.min(DEPTH_MASK as u32));
        let call = u64::from(call_site.min((1 << CALL_BITS) - 1));
        (depth << DEPTH_SHIFT)
            | (call << CALL_SHIFT)
            | u64::from(await_site)
            | if running { RUNNING_BIT } else { 0 }
    }

    pub(crate) fn decode(word: u64) -> Entry {
        Entry {
            depth: ((word >> DEPTH_SHIFT) & DEPTH_MASK) as u32,
            call_site: ((word >> CALL_SHIFT) & ((1 << CALL_BITS) - 1)) as u32,
            await_site: (word & 0xffff_ffff) as u32,
            running: word & RUNNING_BIT != 0,
        }
    }
}

/// The published stack of one task. `#[repr(C)]` for debugger scripts.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct PublishedStack {
    seq: AtomicU64,
    /// Logical length (may exceed the capacity; readers clamp).
    len: AtomicU32,
    _pad: AtomicU32,
    words: [AtomicU64; STACK_CAPACITY],
}

/// Why a copy of a published stack failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Torn;

impl PublishedStack {
    pub(crate) fn new() -> Self {
        PublishedStack {
            seq: AtomicU64::new(0),
            len: AtomicU32::new(0),
            _pad: AtomicU32::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
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

    /// Writer: a frame at `index` starts its poll. Truncates everything after
    /// it (stale entries from an earlier poll).
    #[inline(always)]
    pub(crate) fn enter(&self, index: u32, word: u64) {
        let s = self.begin();
        if let Some(w) = self.words.get(index as usize) {
            w.store(word | RUNNING_BIT, Ordering::Relaxed);
        }
        self.len.store(index.saturating_add(1), Ordering::Relaxed);
        self.end(s);
    }

    /// Writer: a child frame at `index` starts its poll, called from the
    /// `.await` `parent_await` of the running frame at `parent`. The parent's
    /// entry is refreshed in the same step, so a running task shows the
    /// `.await` each ancestor is in right now, not the one of its last
    /// suspension.
    #[inline(always)]
    pub(crate) fn enter_child(&self, index: u32, word: u64, parent: u32, parent_await: u32) {
        let s = self.begin();
        if let Some(p) = self.words.get(parent as usize) {
            let old = p.load(Ordering::Relaxed);
            p.store(
                (old & !0xffff_ffff) | u64::from(parent_await),
                Ordering::Relaxed,
            );
        }
        if let Some(w) = self.words.get(index as usize) {
            w.store(word | RUNNING_BIT, Ordering::Relaxed);
        }
        self.len.store(index.saturating_add(1), Ordering::Relaxed);
        self.end(s);
    }

    /// Writer: the frame at `index` returned `Pending`; `word` describes it
    /// suspended. Its subtree (entries after it) stays.
    #[inline(always)]
    pub(crate) fn suspend(&self, index: u32, word: u64) {
        if let Some(w) = self.words.get(index as usize) {
            let s = self.begin();
            w.store(word, Ordering::Relaxed);
            self.end(s);
        }
    }

    /// Writer: the frame at `index` completed (or unwound); it and its
    /// subtree disappear.
    #[inline(always)]
    pub(crate) fn truncate(&self, index: u32) {
        let s = self.begin();
        self.len.store(index, Ordering::Relaxed);
        self.end(s);
    }

    /// Reader: copies the entries into `out` (cleared first). Returns the
    /// logical length (greater than `out.len()` when truncated).
    pub(crate) fn copy_into(&self, out: &mut Vec<u64>) -> Result<u32, Torn> {
        out.clear();
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            return Err(Torn);
        }
        let len = self.len.load(Ordering::Relaxed);
        let n = (len as usize).min(STACK_CAPACITY);
        out.extend(self.words[..n].iter().map(|w| w.load(Ordering::Relaxed)));
        // Order the data loads before the second `seq` load.
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        if s1 != s2 {
            out.clear();
            return Err(Torn);
        }
        Ok(len)
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A reader copying while the writer pushes, suspends and truncates never
    /// returns a mix of two moments: every accepted copy equals one of the
    /// states the writer passed through.
    #[test]
    fn copy_is_never_torn() {
        loom::model(|| {
            let stack = Arc::new(PublishedStack::new());
            let w = stack.clone();
            let a = Entry::encode(0, 1, 0, false);
            let b = Entry::encode(1, 2, 7, false);
            let writer = loom::thread::spawn(move || {
                w.enter(0, a);
                w.enter(1, b);
                w.suspend(1, b);
                w.truncate(1);
            });
            let mut out = Vec::new();
            if let Ok(len) = stack.copy_into(&mut out) {
                let states: [&[u64]; 5] = [
                    &[],
                    &[a | RUNNING_BIT],
                    &[a | RUNNING_BIT, b | RUNNING_BIT],
                    &[a | RUNNING_BIT, b],
                    &[a | RUNNING_BIT],
                ];
                assert_eq!(len as usize, out.len());
                assert!(states.contains(&out.as_slice()), "torn copy {out:x?}");
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
        let e = Entry::decode(Entry::encode(3, 77, 9, true));
        assert_eq!(
            e,
            Entry {
                depth: 3,
                call_site: 77,
                await_site: 9,
                running: true
            }
        );
        let big = Entry::decode(Entry::encode(10_000, u32::MAX, u32::MAX, false));
        assert_eq!(big.depth, 255);
        assert_eq!(big.call_site, (1 << 23) - 1);
        assert_eq!(big.await_site, u32::MAX);
        assert!(!big.running);
    }

    #[test]
    fn truncation_beyond_capacity_is_reported() {
        let s = PublishedStack::new();
        for i in 0..(STACK_CAPACITY as u32 + 5) {
            s.enter(i, Entry::encode(i, 1, 0, false));
        }
        let mut out = Vec::new();
        let len = s.copy_into(&mut out).unwrap();
        assert_eq!(len as usize, STACK_CAPACITY + 5);
        assert_eq!(out.len(), STACK_CAPACITY);
        s.truncate(2);
        assert_eq!(s.copy_into(&mut out).unwrap(), 2);
        assert_eq!(out.len(), 2);
    }
}
