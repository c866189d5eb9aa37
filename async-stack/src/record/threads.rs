//! **Thread roots**: a process-wide list that maps each OS thread that
//! polls task roots to its thread state ([`Active`]), for readers that
//! cannot reach a thread-local: debugger scripts reading a live process or
//! a core file (see [`crate::debug`]), and later the sampler.
//!
//! # Protocol
//!
//! - A thread registers the first time it polls a task root, when it first
//!   reads its OS thread id ([`Active::thread_id`], cold). It takes a free
//!   entry (one left by an exited thread) or a new one, and stores the
//!   address of its `Active`, then its OS thread id (Linux `gettid`), both
//!   with release ordering.
//! - When the thread exits, a thread-local guard clears the entry (id
//!   first, then the address) and puts it on the free list for the next
//!   thread. The entry itself is never freed.
//! - Entries live in pages that are never freed, named by a fixed page
//!   table; `len` counts the entries ever handed out. A reader scans
//!   `0..len` and skips entries whose id is `0`. A debugger reading a
//!   stopped process sees each entry whole; an in-process reader must treat
//!   the `Active` address as valid only while the entry still names the
//!   same thread (no in-process reader dereferences it yet).
//!
//! Under loom nothing registers: the models pass their thread state
//! explicitly.

#![cfg_attr(async_stack_loom, allow(dead_code))]

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::record::current::Active;

/// One thread's entry. `#[repr(C)]` for debugger scripts.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct ThreadRoot {
    /// The thread's OS id (Linux `gettid`); `0` for a free entry.
    pub(crate) tid: AtomicU32,
    _pad: u32,
    /// The thread's [`Active`], in its thread-local storage.
    pub(crate) active: AtomicPtr<Active>,
}

/// Entries per page.
pub(crate) const THREAD_PAGE: usize = 64;
/// Pages of the list: room for this many threads polling at once.
pub(crate) const THREAD_PAGES: usize = 1024;

/// The list. `#[repr(C)]`: the debug descriptor points at `pages` and
/// `len`.
#[repr(C)]
pub(crate) struct ThreadRoots {
    pub(crate) pages: [AtomicPtr<ThreadRoot>; THREAD_PAGES],
    pub(crate) len: AtomicUsize,
    free: Mutex<Vec<usize>>,
}

/// Every thread that has polled a task root and not exited.
pub(crate) static THREAD_ROOTS: ThreadRoots = ThreadRoots {
    pages: [const { AtomicPtr::new(std::ptr::null_mut()) }; THREAD_PAGES],
    len: AtomicUsize::new(0),
    free: Mutex::new(Vec::new()),
};

impl ThreadRoots {
    /// Entry `index`, if it was ever handed out.
    pub(crate) fn get(&self, index: usize) -> Option<&'static ThreadRoot> {
        if index >= self.len.load(Ordering::Acquire) {
            return None;
        }
        let page = self.pages.get(index / THREAD_PAGE)?.load(Ordering::Acquire);
        // SAFETY: `index < len`: its page was allocated (a leaked boxed
        // slice of `THREAD_PAGE` entries, never freed) and stored with
        // release ordering before `len` covered it.
        unsafe { page.add(index % THREAD_PAGE).as_ref() }
    }

    /// An entry for a new thread: a free one, or a fresh one (`None` when
    /// the list is full).
    fn take(&self) -> Option<usize> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = free.pop() {
            return Some(index);
        }
        let index = self.len.load(Ordering::Relaxed);
        let cell = self.pages.get(index / THREAD_PAGE)?;
        if cell.load(Ordering::Relaxed).is_null() {
            let page: Box<[ThreadRoot]> = (0..THREAD_PAGE)
                .map(|_| ThreadRoot {
                    tid: AtomicU32::new(0),
                    _pad: 0,
                    active: AtomicPtr::new(std::ptr::null_mut()),
                })
                .collect();
            cell.store(Box::into_raw(page).cast(), Ordering::Release);
        }
        // Published under the lock, after the page.
        self.len.store(index + 1, Ordering::Release);
        Some(index)
    }

    fn give_back(&self, index: usize) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(index);
    }
}

/// Clears this thread's entry when the thread exits.
struct Registration(Cell<Option<usize>>);

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(entry) = self.0.get().and_then(|i| THREAD_ROOTS.get(i)) {
            entry.tid.store(0, Ordering::Release);
            entry.active.store(std::ptr::null_mut(), Ordering::Release);
            THREAD_ROOTS.give_back(self.0.get().unwrap_or_default());
        }
    }
}

thread_local! {
    static REGISTRATION: Registration = const { Registration(Cell::new(None)) };
}

/// Registers the calling thread, whose state is `active` and OS id `tid`.
/// Does nothing if it is registered already, during thread teardown, or
/// when the list is full.
#[cold]
pub(crate) fn register(active: &Active, tid: u32) {
    let _ = REGISTRATION.try_with(|r| {
        if r.0.get().is_some() {
            return;
        }
        let Some(index) = THREAD_ROOTS.take() else {
            return;
        };
        let Some(entry) = THREAD_ROOTS.get(index) else {
            return;
        };
        entry
            .active
            .store(std::ptr::from_ref(active).cast_mut(), Ordering::Release);
        entry.tid.store(tid, Ordering::Release);
        r.0.set(Some(index));
    });
}

/// The registered threads, as `(OS id, state address)`: for tests.
#[cfg(test)]
pub(crate) fn registered() -> Vec<(u32, *const Active)> {
    (0..THREAD_ROOTS.len.load(Ordering::Acquire))
        .filter_map(|i| THREAD_ROOTS.get(i))
        .filter(|e| e.tid.load(Ordering::Acquire) != 0)
        .map(|e| {
            (
                e.tid.load(Ordering::Acquire),
                e.active.load(Ordering::Acquire).cast_const(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread that polls a task root is listed with its OS id and the
    /// address of its state; once it exits, its entry is free and the next
    /// thread takes it.
    #[test]
    fn a_polling_thread_is_listed_until_it_exits_and_its_entry_is_reused() {
        use crate::TracedExt;
        let (tid, active) = std::thread::spawn(|| {
            futures::executor::block_on(async {}.traced_named("thread-root-test"));
            let tid = crate::record::current::current().thread_id();
            let active = std::ptr::from_ref(crate::record::current::current());
            assert!(REGISTRATION.with(|r| r.0.get()).is_some());
            assert!(registered().contains(&(tid, active)));
            (tid, active as usize)
        })
        .join()
        .unwrap();
        assert_ne!(tid, 0);
        assert!(
            !registered()
                .iter()
                .any(|&(t, a)| t == tid && a as usize == active),
            "the exited thread is no longer listed"
        );
    }

    /// An entry given back is the next one taken; the list grows only
    /// when none is free.
    #[test]
    fn entries_given_back_are_taken_again_before_the_list_grows() {
        let list = ThreadRoots {
            pages: [const { AtomicPtr::new(std::ptr::null_mut()) }; THREAD_PAGES],
            len: AtomicUsize::new(0),
            free: Mutex::new(Vec::new()),
        };
        let a = list.take().unwrap();
        let b = list.take().unwrap();
        assert_eq!((a, b), (0, 1));
        list.give_back(a);
        assert_eq!(list.take(), Some(a));
        assert_eq!(list.take(), Some(2));
        assert_eq!(list.len.load(Ordering::Relaxed), 3);
    }
}
