//! **Thread roots**: a process-wide list that maps each OS thread that
//! polls task roots to its thread state ([`Active`]), for readers that
//! cannot reach a thread-local: debugger scripts reading a live process or
//! a core file (see [`crate::debug`]), and later the sampler.
//!
//! # Protocol
//!
//! - The list is an [`Arena`] of [`ThreadRoot`] entries: pages that are
//!   never freed, named by a page table, a count of entries handed out, and
//!   a free list of entries given back.
//! - A thread registers the first time it polls a task root, when it first
//!   reads its OS thread id ([`Active::thread_id`], cold). It takes a free
//!   entry (one left by an exited thread) or a new one, and stores the
//!   address of its `Active`, then its OS thread id (Linux `gettid`), both
//!   with release ordering.
//! - When the thread exits, a thread-local guard clears the entry (id
//!   first, then the address) and gives it back for the next thread.
//! - A reader scans the entries handed out and skips those whose id is
//!   `0`. A debugger reading a stopped process sees each entry whole; an
//!   in-process reader must treat the `Active` address as valid only while
//!   the entry still names the same thread (no in-process reader
//!   dereferences it yet).
//!
//! Not built under loom: the models pass their thread state explicitly.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::record::current::Active;
use crate::task::registry::Arena;

/// One thread's entry. `#[repr(C)]` for debugger scripts.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct ThreadRoot {
    /// The thread's OS id (Linux `gettid`); `0` for a free entry.
    pub(crate) tid: AtomicU32,
    _pad: u32,
    /// The thread's [`Active`], in its thread-local storage.
    pub(crate) active: AtomicPtr<Active>,
    /// The lowest and one past the highest address of the thread's stack
    /// (`0`, `0` when unknown), so that the sampler's signal handler never
    /// reads outside it while following frame pointers.
    pub(crate) stack_lo: AtomicUsize,
    pub(crate) stack_hi: AtomicUsize,
}

impl ThreadRoot {
    fn free() -> Self {
        ThreadRoot {
            tid: AtomicU32::new(0),
            _pad: 0,
            active: AtomicPtr::new(std::ptr::null_mut()),
            stack_lo: AtomicUsize::new(0),
            stack_hi: AtomicUsize::new(0),
        }
    }
}

/// The most threads listed at once; a thread that finds the list full is
/// not listed (its tasks still work, and still show in `async-tasks`).
pub(crate) const MAX_THREADS: usize = 1 << 16;

/// Every thread that has polled a task root and not exited.
pub(crate) fn roots() -> &'static Arena<ThreadRoot> {
    static ROOTS: OnceLock<Arena<ThreadRoot>> = OnceLock::new();
    if let Some(r) = ROOTS.get() {
        return r;
    }
    let r = ROOTS.get_or_init(|| Arena::new(MAX_THREADS, ThreadRoot::free));
    // Every thread that gets here stores the same addresses.
    crate::debug::publish_thread_roots(r.pages, &r.fresh);
    r
}

/// Clears this thread's entry when the thread exits.
struct Registration(Cell<Option<usize>>);

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(index) = self.0.get() else {
            return;
        };
        if let Some(entry) = roots().get(index) {
            entry.tid.store(0, Ordering::Release);
            entry.active.store(std::ptr::null_mut(), Ordering::Release);
            roots().release(index);
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
        let Some(index) = roots().alloc() else {
            return;
        };
        let Some(entry) = roots().get(index) else {
            return;
        };
        entry
            .active
            .store(std::ptr::from_ref(active).cast_mut(), Ordering::Release);
        let (lo, hi) = stack_bounds();
        entry.stack_lo.store(lo, Ordering::Release);
        entry.stack_hi.store(hi, Ordering::Release);
        entry.tid.store(tid, Ordering::Release);
        r.0.set(Some(index));
    });
}

/// The calling thread's stack, as its lowest address and one past its
/// highest; `(0, 0)` when unknown.
fn stack_bounds() -> (usize, usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `attr` is initialised by `pthread_getattr_np` before it
        // is read, and destroyed once; the out-pointers are valid.
        unsafe {
            let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
            if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
                return (0, 0);
            }
            let mut addr = std::ptr::null_mut();
            let mut size = 0;
            let rc = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
            libc::pthread_attr_destroy(attr.as_mut_ptr());
            if rc != 0 {
                return (0, 0);
            }
            (addr as usize, (addr as usize).saturating_add(size))
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        (0, 0)
    }
}

/// The registered threads, as `(OS id, state address)`: for tests.
#[cfg(test)]
pub(crate) fn registered() -> Vec<(u32, *const Active)> {
    (0..roots().len())
        .filter_map(|i| roots().get(i))
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
    /// address of its state; once it exits, it is no longer listed.
    #[test]
    fn a_polling_thread_is_listed_until_it_exits() {
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
        let list = Arena::new(MAX_THREADS, ThreadRoot::free);
        let a = list.alloc().unwrap();
        let b = list.alloc().unwrap();
        assert_eq!((a, b), (0, 1));
        list.release(a);
        assert_eq!(list.alloc(), Some(a));
        assert_eq!(list.alloc(), Some(2));
        assert_eq!(list.len(), 3);
    }
}
