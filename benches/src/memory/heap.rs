//! A global allocator that counts the heap bytes and blocks handed out,
//! so the memory probe can say how much of a task's resident memory was
//! asked for.
//!
//! Invariant: [`CountingSystem`] changes nothing about the heap: every call
//! goes to [`System`] with the caller's layout, and the counters are two
//! static atomics (no allocation). The counters count only while
//! `CountingSystem` is the global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// [`System`], counting the heap bytes and blocks currently handed out.
///
/// Two relaxed atomic additions per call, the same in every variant; it
/// asks `System` for exactly the layouts it is given, so the heap's shape
/// is unchanged. Install it with `#[global_allocator]` (only `mem_probe`
/// does: a global allocator in this library would apply to every bench).
#[derive(Debug)]
pub struct CountingSystem;

/// Bytes handed out and not freed (wrapping: only differences count).
static BYTES: AtomicUsize = AtomicUsize::new(0);
/// Blocks handed out and not freed (likewise).
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// A reading of the counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live {
    pub(crate) bytes: usize,
    pub(crate) blocks: usize,
}

impl Live {
    /// The bytes and blocks added since `earlier` (negative if freed).
    pub(crate) fn since(self, earlier: Live) -> (f64, f64) {
        let delta = |now: usize, then: usize| now.wrapping_sub(then) as isize as f64;
        (
            delta(self.bytes, earlier.bytes),
            delta(self.blocks, earlier.blocks),
        )
    }
}

/// The counters now.
pub(crate) fn live() -> Live {
    Live {
        bytes: BYTES.load(Ordering::Relaxed),
        blocks: BLOCKS.load(Ordering::Relaxed),
    }
}

fn add(bytes: usize, blocks: usize) {
    BYTES.fetch_add(bytes, Ordering::Relaxed);
    BLOCKS.fetch_add(blocks, Ordering::Relaxed);
}

fn sub(bytes: usize, blocks: usize) {
    BYTES.fetch_sub(bytes, Ordering::Relaxed);
    BLOCKS.fetch_sub(blocks, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the counters do not
// allocate.
unsafe impl GlobalAlloc for CountingSystem {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's obligations for `alloc` are `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size(), 1);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size(), 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, i.e. from
        // `System` with the same layout.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size(), 1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size, 0);
            sub(layout.size(), 0);
        }
        p
    }
}
