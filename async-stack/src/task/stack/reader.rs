//! The published stack's **readers**: a copy of the slots taken inside a
//! record's read window (or in a signal handler on the writer's own
//! thread), and the tree built from it (see [`crate::task::stack`] for
//! the protocol).

use crate::record::current::NO_SLOT;
use crate::shim::{AtomicU64, Ordering, fence};
use crate::task::record::layout::TaskRecord;
use crate::task::registry;
use crate::task::stack::words::{
    CHUNK_SLOTS, DIR_ENTRIES, HEAD_SLOTS, Meta, STACK_CAPACITY, dir_get, foreign, locate, meta,
    word,
};

impl TaskRecord {
    // ---- where slots live (the writer reads them too) ----

    /// The `meta` word, unpacked.
    pub(crate) fn meta(&self) -> Meta {
        meta::unpack(self.meta.load(Ordering::Relaxed))
    }

    /// The word of slot `slot`, if the chunk it lives in exists. Any
    /// thread: chunks are never freed; what a reader finds there is
    /// validated by its copy's counters and the record's id.
    #[inline]
    pub(crate) fn slot_word(&self, slot: u32) -> Option<&AtomicU64> {
        match self.slots.get(slot as usize) {
            Some(w) => Some(w),
            None => self.chunk_slot_word(slot),
        }
    }

    /// [`slot_word`](Self::slot_word) past the record's own slots.
    #[inline(never)]
    pub(crate) fn chunk_slot_word(&self, slot: u32) -> Option<&AtomicU64> {
        match locate(slot) {
            Ok(i) => self.slots.get(i),
            Err((entry, i)) => self.chunk_run(entry, i)?.first(),
        }
    }

    /// The words from slot `slot`'s to the end of the array it lives in
    /// (the record's slots, the head chunk's, or a directory chunk's), if
    /// that exists.
    #[inline]
    fn run_at(&self, slot: u32) -> Option<&[AtomicU64]> {
        match locate(slot) {
            Ok(i) => self.slots.get(i..),
            Err((entry, i)) => self.chunk_run(entry, i),
        }
    }

    /// [`run_at`](Self::run_at) in a chunk: from word `i` of the head
    /// chunk (`entry` `None`) or of directory entry `entry`'s chunk.
    #[inline(never)]
    fn chunk_run(&self, entry: Option<u32>, i: usize) -> Option<&[AtomicU64]> {
        let head = registry::chunk(self.chunk.load(Ordering::Relaxed))?;
        let (chunk, len) = match entry {
            None => (head, HEAD_SLOTS),
            Some(e) if e < DIR_ENTRIES => (registry::chunk(dir_get(head, e))?, CHUNK_SLOTS),
            Some(_) => return None,
        };
        chunk.words.get(i..len as usize)
    }

    /// The words of slots `from..to` with their slot numbers, in order,
    /// looked up once per array rather than once per slot (a task at
    /// [`STACK_CAPACITY`] has 63: every frame that first polls in it
    /// looks through all of them for a free one). Ends early at a chunk
    /// that does not exist.
    #[inline]
    pub(crate) fn slot_words(&self, from: u32, to: u32) -> SlotWords<'_> {
        SlotWords {
            record: self,
            next: from,
            to,
            run: &[],
        }
    }

    // ---- readers ----

    /// Copies the raw stack into `out` (words by slot), with the `meta`
    /// and `foreign` words it was read with. Called inside
    /// [`TaskRecord::read`]'s window: the caller validates the copy.
    pub(crate) fn copy_raw(&self, out: &mut StackCopy) -> Result<(), Torn> {
        out.raw.clear();
        let m = self.meta();
        out.meta = m;
        let top = m.top.min(NO_SLOT);
        out.raw.extend(
            self.slot_words(0, top)
                .map(|(_, w)| w.load(Ordering::Relaxed)),
        );
        // A chunk missing under `top`: the copy raced with the task's end.
        if out.raw.len() != top as usize {
            return Err(Torn);
        }
        Ok(())
    }
}

/// The iterator of [`TaskRecord::slot_words`].
pub(crate) struct SlotWords<'a> {
    record: &'a TaskRecord,
    next: u32,
    to: u32,
    /// The rest of the array slot `next` lives in (empty: look it up).
    run: &'a [AtomicU64],
}

impl<'a> Iterator for SlotWords<'a> {
    type Item = (u32, &'a AtomicU64);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.to {
            return None;
        }
        if self.run.is_empty() {
            self.run = self.record.run_at(self.next)?;
        }
        let (w, rest) = self.run.split_first()?;
        self.run = rest;
        let slot = self.next;
        self.next += 1;
        Some((slot, w))
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
        let mut len = 0;
        for ((_, w), out) in self.slot_words(0, top).zip(&mut out.words) {
            *out = w.load(Ordering::Relaxed);
            len += 1;
        }
        if len != top {
            return Err(Torn);
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
    pub(crate) fn build_from_signal(&mut self, c: &SignalCopy, current_slot: u32) {
        self.raw.clear();
        self.raw
            .extend_from_slice(&c.words[..(c.len as usize).min(STACK_CAPACITY)]);
        self.meta = meta::unpack(c.meta);
        self.build(current_slot, c.foreign);
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
    /// The birth field of its word: with the site, which frame of the
    /// task it is.
    pub(crate) birth: u32,
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
    pub(crate) fn build(&mut self, current_slot: u32, f: u64) {
        self.frames.clear();
        let n = self.raw.len();
        let unseen =
            foreign::hidden_retired(f).wrapping_sub(self.meta.seen_hidden_retired) & 0xffff;
        let hidden = self.meta.hidden.saturating_sub(unseen as u32);
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
            let running = (current_slot as usize) < n;
            self.frames.extend((0..n).map(|i| CopiedFrame {
                depth: i as u32,
                site: word::site(self.raw[i]),
                birth: word::birth(self.raw[i]),
                running: running && i <= current_slot as usize,
                innermost: i == current_slot as usize,
            }));
            self.hidden = hidden;
            return;
        }
        let live = self.raw.iter().filter(|&&w| word::shown(w)).count() as u32;
        if !root_ok {
            self.hidden = hidden.saturating_add(live);
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
                birth: word::birth(self.raw[s]),
                running: false,
                innermost: s == current_slot as usize,
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
        if (current_slot as usize) < n && visited & (1 << current_slot) != 0 {
            let mut on_path = 0u64;
            let mut s = current_slot as usize;
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
        self.hidden = hidden.saturating_add(live - visited.count_ones());
    }
}
