//! Rendered text kept and copied wherever it repeats: what makes the text
//! and JSON forms of a large dump a matter of copying.
//!
//! A dump repeats itself: frames come from a few interned sites, and many
//! tasks wait in the same place. 10,000 tasks at depth 9 hold 90,000 frames
//! but only 9 distinct frames, and a single distinct stack. So each
//! renderer (`text.rs`, `json_write.rs`) keeps two [`RenderCache`]s, one
//! for frames and one for whole stacks (which it renders from the first).
//!
//! A cache is a direct-mapped table: a key hashes to one slot, which keeps
//! a copy of the last key rendered there and its text. A hit (the key
//! compares equal, as far as the rendering shows) copies the text; a miss,
//! or a collision, renders it again into the slot. So a cache is never
//! wrong, only sometimes slower, and its size is bounded whatever the dump
//! holds. Its slots keep copies of their keys, not references, so that it
//! outlives the task it was filled from: a streaming dump reads every task
//! into the same scratch.
//!
//! What "equal" means depends on the rendering (the text form does not
//! show where a function is defined; JSON does), so a cache is typed by a
//! [`Rendering`], which says how keys compare and how a slot keeps one.

use super::DumpFrame;

/// Whether two strings are equal, deciding at once for two borrows of the
/// same interned site string.
#[inline]
pub(super) fn same_str(a: &str, b: &str) -> bool {
    a.len() == b.len() && (std::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
}

/// What a [`RenderCache`] keeps text for: its key type, the copy of a key
/// a slot keeps, and when two keys render alike.
pub(super) trait Rendering {
    /// What the text is rendered from.
    type Key: ?Sized;
    /// The copy of a key a slot keeps.
    type Owned;
    /// Whether `key` renders to the same text as `seen`.
    fn same(key: &Self::Key, seen: &Self::Owned) -> bool;
    /// Keeps a copy of `key` in `slot`, reusing what it holds.
    fn store(key: &Self::Key, slot: &mut Option<Self::Owned>);
}

/// Keeps a copy of a frame: strings of a live dump are borrowed
/// (`'static`), so this copies pointers, not text.
#[inline]
pub(super) fn store_frame(frame: &DumpFrame, slot: &mut Option<DumpFrame>) {
    *slot = Some(frame.clone());
}

/// Keeps a copy of a stack, in the slot's buffer.
pub(super) fn store_stack(frames: &[DumpFrame], slot: &mut Option<Vec<DumpFrame>>) {
    let seen = slot.get_or_insert_with(Vec::new);
    seen.clear();
    seen.extend_from_slice(frames);
}

/// A hash of a frame as the text form shows it (depth, function, `.await`
/// site, running), strings by length only: cheap, and enough to spread a
/// dump's few distinct frames.
#[inline]
pub(super) fn frame_hash(frame: &DumpFrame) -> u64 {
    let (line, column, file_len) = frame
        .awaiting_at
        .as_ref()
        .map_or((0, 0, 0), |at| (at.line, at.column, at.file.len()));
    let key = u64::from(frame.depth)
        ^ (frame.function.len() as u64) << 8
        ^ u64::from(line) << 24
        ^ u64::from(column) << 44
        ^ (file_len as u64) << 54
        ^ u64::from(frame.running) << 63;
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A hash of a stack, from the hashes of its frames by `frame`.
#[inline]
pub(super) fn stack_hash(frames: &[DumpFrame], frame: impl Fn(&DumpFrame) -> u64) -> u64 {
    frames.iter().fold(frames.len() as u64, |h, f| {
        (h.rotate_left(23) ^ frame(f)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    })
}

/// Text rendered once and copied wherever it repeats (see the module
/// docs).
pub(super) struct RenderCache<R: Rendering> {
    slots: Box<[(Option<R::Owned>, String)]>,
    /// `64 - log2(slots)`: a key's slot is the top bits of its hash (a
    /// multiplicative hash mixes into those).
    shift: u32,
}

impl<R: Rendering> RenderCache<R> {
    /// A table of `2^bits` slots.
    pub(super) fn new(bits: u32) -> Self {
        assert!((1..=16).contains(&bits), "a table of 2 to 65536 slots");
        RenderCache {
            slots: (0..1usize << bits).map(|_| (None, String::new())).collect(),
            shift: 64 - bits,
        }
    }

    /// The text of `key` (with hash `hash`): the text in its slot if the
    /// slot holds a key that renders the same, else rendered there by
    /// `render` first.
    #[inline]
    pub(super) fn text(
        &mut self,
        key: &R::Key,
        hash: u64,
        render: impl FnOnce(&mut String, &R::Key),
    ) -> &str {
        let (seen, text) = &mut self.slots[(hash >> self.shift) as usize];
        if !seen.as_ref().is_some_and(|seen| R::same(key, seen)) {
            text.clear();
            render(text, key);
            R::store(key, seen);
        }
        text
    }
}
