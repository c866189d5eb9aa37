//! **Never-freed page tables**: the one storage scheme of every table
//! that other threads (and debuggers) read without a lock.
//!
//! A table is a fixed array of page pointers; a page holds [`PAGE`] items
//! and is allocated by the first thread that needs it ([`page`]), published
//! with release ordering, and never freed. So a reader that loads a
//! non-null page pointer with acquire ordering may dereference any item of
//! it at any time, from any thread, for the rest of the process; the
//! items' own fields say whether what they hold is current.
//!
//! [`Arena`] adds the handing out of indices on top: a counter of fresh
//! indices and a free list. The task registry (records, stack chunks,
//! extensions), the thread-root list and the wake recorder's side table
//! are built on these two.

use crate::shim::{AtomicPtr, AtomicUsize, Mutex, Ordering, lock};

/// Items per page of every arena.
pub(crate) const PAGE: usize = if cfg!(async_stack_loom) { 2 } else { 256 };

/// An arena of `T`s in pages that are never freed, indexed from 0, with a
/// free list of indices.
pub(crate) struct Arena<T: 'static> {
    pub(crate) pages: &'static [AtomicPtr<T>],
    /// How many items exist: indices `0..fresh` have been handed out (it
    /// may briefly exceed `capacity`).
    pub(crate) fresh: &'static AtomicUsize,
    pub(crate) capacity: usize,
    pub(crate) free: Mutex<Vec<u32>>,
    make: fn() -> T,
}

impl<T: 'static> Arena<T> {
    /// An arena of up to `capacity` items, with a page table and a count
    /// of its own (tests and loom models; the process's arenas live in
    /// statics, see [`Arena::with_pages`]).
    #[cfg(any(test, async_stack_loom))]
    pub(crate) fn new(capacity: usize, make: fn() -> T) -> Self {
        let pages: Box<[AtomicPtr<T>]> = (0..capacity.div_ceil(PAGE))
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        let fresh = Box::leak(Box::new(AtomicUsize::new(0)));
        Self::with_pages(Box::leak(pages), fresh, capacity, make)
    }

    /// An arena of up to `capacity` items over the page table `pages` and
    /// the count `fresh` (statics, where a debugger finds them).
    pub(crate) fn with_pages(
        pages: &'static [AtomicPtr<T>],
        fresh: &'static AtomicUsize,
        capacity: usize,
        make: fn() -> T,
    ) -> Self {
        Arena {
            pages,
            fresh,
            capacity,
            free: Mutex::new(Vec::new()),
            make,
        }
    }

    /// Item `index`, if it was ever handed out.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&'static T> {
        let page = self.pages.get(index / PAGE)?.load(Ordering::Acquire);
        if page.is_null() {
            return None;
        }
        // SAFETY: a non-null page is a leaked `Box<[T]>` of `PAGE` items,
        // published with release ordering after it was built and never
        // freed, so it is valid for `'static`; `index % PAGE < PAGE`.
        Some(unsafe { &*page.add(index % PAGE) })
    }

    /// Item `index`, its page allocated if it was not; `None` past the
    /// capacity.
    pub(crate) fn get_or_make(&self, index: usize) -> Option<&'static T> {
        page(self.pages.get(index / PAGE)?, PAGE, self.make);
        self.get(index)
    }

    /// A never-used index, with its page allocated; `None` when full.
    pub(crate) fn fresh(&self) -> Option<usize> {
        let index = self.fresh.fetch_add(1, Ordering::Relaxed);
        if index >= self.capacity {
            self.fresh.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        page(&self.pages[index / PAGE], PAGE, self.make);
        Some(index)
    }

    /// A free index, from the free list or fresh.
    pub(crate) fn alloc(&self) -> Option<usize> {
        if let Some(i) = lock(&self.free).pop() {
            return Some(i as usize);
        }
        self.fresh()
    }

    pub(crate) fn release(&self, index: usize) {
        lock(&self.free).push(index as u32);
    }

    /// Items handed out so far (free or not).
    pub(crate) fn len(&self) -> usize {
        self.fresh.load(Ordering::Acquire).min(self.capacity)
    }
}

/// The page in `cell`: `len` items made by `make`, allocated and
/// published (release) by the first caller, never freed. Another thread
/// that loads a non-null `cell` with acquire ordering sees the page whole.
pub(crate) fn page<T>(cell: &AtomicPtr<T>, len: usize, make: impl Fn() -> T) -> *mut T {
    let current = cell.load(Ordering::Acquire);
    if !current.is_null() {
        return current;
    }
    let page: Box<[T]> = (0..len).map(|_| make()).collect();
    let page = Box::into_raw(page).cast::<T>();
    match cell.compare_exchange(
        std::ptr::null_mut(),
        page,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => page,
        Err(winner) => {
            // SAFETY: `page` came from `Box::into_raw` of a `[T]` of `len`
            // items just above and lost the race, so no other thread ever
            // saw it.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(page, len)) });
            winner
        }
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use crate::pages::page;
    use crate::shim::{AtomicPtr, AtomicU64, Ordering};

    /// Two threads publish the same page while a third reads it: one page
    /// wins, both publishers get it, and a reader that sees the page sees
    /// every item as it was made (the wake graph's slots and the arenas
    /// rely on this).
    #[test]
    fn a_page_is_published_once_and_seen_whole() {
        loom::model(|| {
            let cell: &'static AtomicPtr<AtomicU64> =
                Box::leak(Box::new(AtomicPtr::new(std::ptr::null_mut())));
            let make = || AtomicU64::new(7);
            let a = loom::thread::spawn(move || page(cell, 2, make) as usize);
            let b = loom::thread::spawn(move || page(cell, 2, make) as usize);
            let reader = loom::thread::spawn(move || {
                let p = cell.load(Ordering::Acquire);
                if !p.is_null() {
                    // SAFETY: a published page of 2 items, never freed.
                    let second = unsafe { &*p.add(1) };
                    assert_eq!(second.load(Ordering::Relaxed), 7);
                }
            });
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            reader.join().unwrap();
            assert_eq!(a, b, "both publishers get the one page");
            assert_eq!(cell.load(Ordering::Relaxed) as usize, a);
        });
    }
}
