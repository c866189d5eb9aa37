//! **Never-freed page tables**: the one storage scheme of every table
//! that other threads (and debuggers) read without a lock.
//!
//! A table is a fixed array of page pointers; a page holds a fixed number
//! of items and is allocated by the first thread that needs it ([`page`]),
//! published with release ordering, and never freed. So a reader that
//! loads a non-null page pointer with acquire ordering may dereference any
//! item of it at any time, from any thread, for the rest of the process
//! ([`get`]); the items' own fields say whether what they hold is current.
//!
//! Two ways of handing out indices sit on top:
//!
//! - [`Arena`]: a counter of fresh indices and a free list. The task
//!   registry (records, stack chunks, extensions) and the thread-root list
//!   are arenas.
//! - [`PushTable`]: push only. Each index is handed out once, its item
//!   written once, under the table's lock, before the published length
//!   covers it, and never freed or written again. The call-site and
//!   await-site tables ([`crate::record::site`]) are push tables.
//!
//! The wake probes' side table ([`crate::task::probe`]) is indexed by
//! record index and hands out nothing: it uses [`get_or_make`] and [`get`]
//! on a page table of its own.
//!
//! # Atomics and loom
//!
//! A page table is an array of [`PageCell`]s and a push table's length a
//! [`CountWord`]: traits that `std`'s atomics implement, and loom's in
//! loom builds. Tables in statics built by `const` initialisers (the push
//! tables, the wake side table) use `std`'s, which loom's atomics cannot
//! replace (they have no `const` constructor); so that the loom models
//! still run the code that ships, these functions are generic over the
//! cell, and each model builds its table on loom's atomics. The arenas use
//! the crate's switch ([`crate::shim`]) directly.

use std::mem::MaybeUninit;

use crate::shim::{AtomicPtr, AtomicUsize, Mutex, Ordering, lock};

/// The atomic pointer to one page of a page table (null: not allocated).
pub(crate) trait PageCell<T>: Sync {
    fn load(&self, order: Ordering) -> *mut T;
    /// Stores `page` if the cell is still null (acquire-release): `Ok`, or
    /// `Err` with the page another thread published first (acquire).
    fn publish(&self, page: *mut T) -> Result<*mut T, *mut T>;
}

/// The published length of a [`PushTable`].
pub(crate) trait CountWord: Sync {
    fn load(&self, order: Ordering) -> usize;
    fn store(&self, value: usize, order: Ordering);
}

/// Implements [`PageCell`] and [`CountWord`] for the atomics of the
/// module `$atomic`.
macro_rules! page_table_atomics {
    ($($atomic:ident)::+) => {
        impl<T> PageCell<T> for $($atomic)::+::AtomicPtr<T> {
            #[inline]
            fn load(&self, order: Ordering) -> *mut T {
                $($atomic)::+::AtomicPtr::load(self, order)
            }
            #[inline]
            fn publish(&self, page: *mut T) -> Result<*mut T, *mut T> {
                let null = std::ptr::null_mut();
                self.compare_exchange(null, page, Ordering::AcqRel, Ordering::Acquire)
            }
        }

        impl CountWord for $($atomic)::+::AtomicUsize {
            #[inline]
            fn load(&self, order: Ordering) -> usize {
                $($atomic)::+::AtomicUsize::load(self, order)
            }
            #[inline]
            fn store(&self, value: usize, order: Ordering) {
                $($atomic)::+::AtomicUsize::store(self, value, order);
            }
        }
    };
}

page_table_atomics!(std::sync::atomic);
#[cfg(async_stack_loom)]
page_table_atomics!(loom::sync::atomic);

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
        get(self.pages, PAGE, index)
    }

    /// Item `index`, its page allocated if it was not; `None` past the
    /// capacity.
    pub(crate) fn get_or_make(&self, index: usize) -> Option<&'static T> {
        get_or_make(self.pages, PAGE, index, self.make)
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

    /// The items handed out so far (free or not), in index order.
    pub(crate) fn handed_out(&self) -> impl Iterator<Item = &'static T> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

/// Item `index` of the page table `pages`, whose pages hold `page_len`
/// items each, if its page was published; `None` past the table.
#[inline]
pub(crate) fn get<T: 'static, C: PageCell<T>>(
    pages: &[C],
    page_len: usize,
    index: usize,
) -> Option<&'static T> {
    let page = pages.get(index / page_len)?.load(Ordering::Acquire);
    // SAFETY: a non-null page came from `page` with this `page_len`: a
    // leaked `Box<[T]>` of `page_len` items, published with release
    // ordering after it was built (acquire above) and never freed, so it
    // is valid for `'static`; `index % page_len < page_len`.
    unsafe { page.as_ref().map(|_| &*page.add(index % page_len)) }
}

/// Item `index` of the page table `pages` ([`get`]), its page allocated
/// with `make` if it was not; `None` past the table. Inline: a task
/// root's registration calls it for its tokio id, and a call costs more
/// than the page check when the page exists.
#[inline]
pub(crate) fn get_or_make<T: 'static, C: PageCell<T>>(
    pages: &[C],
    page_len: usize,
    index: usize,
    make: impl Fn() -> T,
) -> Option<&'static T> {
    page(pages.get(index / page_len)?, page_len, make);
    get(pages, page_len, index)
}

/// The page in `cell`: `len` items made by `make`, allocated and
/// published (release) by the first caller, never freed. Another thread
/// that loads a non-null `cell` with acquire ordering sees the page whole.
pub(crate) fn page<T, C: PageCell<T> + ?Sized>(
    cell: &C,
    len: usize,
    make: impl Fn() -> T,
) -> *mut T {
    let current = cell.load(Ordering::Acquire);
    if !current.is_null() {
        return current;
    }
    let page: Box<[T]> = (0..len).map(|_| make()).collect();
    let page = Box::into_raw(page).cast::<T>();
    match cell.publish(page) {
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

/// A push-only table of `T`s in never-freed pages of `PAGE` items, with
/// room for `PAGES` pages; index `i` is the `i`-th item pushed.
///
/// - **Writers** take the table's lock ([`lock`](Self::lock)); a
///   [`Pusher`] writes item `len` into its page (allocated on first use)
///   and only then publishes `len + 1` with release ordering. An item is
///   written once and never again, nor freed.
/// - **Readers** take no lock: [`get`](Self::get) loads the length with
///   acquire ordering and reads an item below it, which is whole.
///
/// `#[repr(C)]`, pages first: a debugger reads the page addresses at
/// `pages` and the length (a `usize`) at `len`, from memory alone. A
/// table in a static is built by [`new`](Self::new), on `std`'s atomics;
/// a loom model builds one on loom's with `with_cells`, which exists only
/// in the loom tests (`cfg(all(test, async_stack_loom))`).
#[repr(C)]
pub(crate) struct PushTable<
    T: 'static,
    const PAGE: usize,
    const PAGES: usize,
    C = std::sync::atomic::AtomicPtr<MaybeUninit<T>>,
    W = std::sync::atomic::AtomicUsize,
> {
    /// Page addresses (null: not allocated yet).
    pub(crate) pages: [C; PAGES],
    /// Items published: indices `0..len` are readable.
    pub(crate) len: W,
    /// Held by the one writer. `std`'s, in a static too; loom need not see
    /// it: readers never take it, and the models have one writer.
    write: std::sync::Mutex<()>,
    items: std::marker::PhantomData<&'static T>,
}

impl<T: 'static, const PAGE: usize, const PAGES: usize> PushTable<T, PAGE, PAGES> {
    /// An empty table, for a `static` (its page table in `.bss`, resident
    /// only where touched).
    pub(crate) const fn new() -> Self {
        PushTable {
            pages: [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; PAGES],
            len: std::sync::atomic::AtomicUsize::new(0),
            write: std::sync::Mutex::new(()),
            items: std::marker::PhantomData,
        }
    }
}

impl<T, const PAGE: usize, const PAGES: usize, C, W> PushTable<T, PAGE, PAGES, C, W>
where
    T: 'static,
    C: PageCell<MaybeUninit<T>>,
    W: CountWord,
{
    /// An empty table over the given cells (null) and length (`0`).
    #[cfg(all(test, async_stack_loom))]
    pub(crate) fn with_cells(pages: [C; PAGES], len: W) -> Self {
        PushTable {
            pages,
            len,
            write: std::sync::Mutex::new(()),
            items: std::marker::PhantomData,
        }
    }

    /// Item `index`, if it is published.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&'static T> {
        if index >= self.len.load(Ordering::Acquire) {
            return None;
        }
        let item = get(&self.pages, PAGE, index)?;
        // SAFETY: `index < len`: the item was written (before `len` was
        // published with release ordering, acquire above) and is never
        // written again.
        Some(unsafe { item.assume_init_ref() })
    }

    /// How many items are published.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The table's writer, while the lock is held.
    pub(crate) fn lock(&self) -> Pusher<'_, T, PAGE, PAGES, C, W> {
        Pusher {
            table: self,
            _guard: crate::shim::lock_std(&self.write),
        }
    }
}

/// The one writer of a [`PushTable`], holding its lock.
pub(crate) struct Pusher<'a, T: 'static, const PAGE: usize, const PAGES: usize, C, W> {
    table: &'a PushTable<T, PAGE, PAGES, C, W>,
    _guard: std::sync::MutexGuard<'a, ()>,
}

impl<T, const PAGE: usize, const PAGES: usize, C, W> Pusher<'_, T, PAGE, PAGES, C, W>
where
    T: 'static,
    C: PageCell<MaybeUninit<T>>,
    W: CountWord,
{
    /// Publishes the item `make` builds at the next index, and returns
    /// that index; `None` (and `make` not called) once the table holds
    /// `capacity` items or is full.
    pub(crate) fn push(&mut self, capacity: usize, make: impl FnOnce() -> T) -> Option<usize> {
        let table = self.table;
        let index = table.len.load(Ordering::Relaxed);
        if index >= capacity.min(PAGE * PAGES) {
            return None;
        }
        let page = page(&table.pages[index / PAGE], PAGE, MaybeUninit::uninit);
        // SAFETY: `page` is a page of `PAGE` items, never freed; item
        // `index % PAGE` is at or past `len`, so no reader looks at it
        // until `len` is published below, and only this writer (holding
        // the lock) writes it, once.
        unsafe { (*page.add(index % PAGE)).write(make()) };
        table.len.store(index + 1, Ordering::Release);
        Some(index)
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
