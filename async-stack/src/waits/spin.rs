//! [`SpinLock`]: the lock of a resource's lists, whose release is one
//! plain store.
//!
//! `std`'s mutex releases with an atomic swap, to learn whether a thread
//! sleeps on it; a contended wait takes a resource's lock twice (at its
//! start and at its end), so that is two atomic read-modify-writes per
//! wait, on top of the two that take it. The lists' critical sections are
//! a few stores (the wait path) or a copy of two short vectors (the
//! readers, `deadlocks()` and the dumps), so a thread that finds the lock
//! taken spins briefly and then yields, and none ever sleeps on it: the
//! release need not look.
//!
//! A panic while the lock is held releases it (the guard's drop), like
//! [`crate::shim::lock`] recovering a poisoned mutex: the lists stay valid
//! across a panic (each change is one push, pop or remove).
//!
//! Under loom, [`SpinLock`] is loom's mutex: a model with two threads
//! spinning can switch between them forever, which loom cannot bound. The
//! spin protocol itself ([`RawSpin`]) has a model of its own, with one
//! thread spinning.

use crate::shim::{AtomicU32, Ordering};

/// The lock word: taken with a compare-and-swap (acquire), released with
/// a plain store (release).
#[derive(Debug)]
pub(crate) struct RawSpin {
    /// 1 while held.
    locked: AtomicU32,
}

impl RawSpin {
    pub(crate) fn new() -> Self {
        RawSpin {
            locked: AtomicU32::new(0),
        }
    }

    /// Takes the lock, spinning (then yielding) while another holds it.
    #[inline]
    pub(crate) fn lock(&self) {
        if self
            .locked
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            spins = pause(spins);
            // Loads until it looks free, so that spinning writes nothing
            // (not under loom, where a relaxed load may read the old value
            // again and again: a branch each time).
            #[cfg(not(async_stack_loom))]
            while self.locked.load(Ordering::Relaxed) != 0 {
                spins = pause(spins);
            }
            if self
                .locked
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Releases the lock, which the caller holds.
    #[inline]
    pub(crate) fn unlock(&self) {
        self.locked.store(0, Ordering::Release);
    }
}

/// One turn of waiting for the lock, the `spins`-th: a spin-loop hint for
/// the first 100, then a yield of the thread (under loom, always a
/// yield); returns the next count.
fn pause(spins: u32) -> u32 {
    #[cfg(async_stack_loom)]
    loom::thread::yield_now();
    #[cfg(not(async_stack_loom))]
    if spins < 100 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
    spins.saturating_add(1)
}

/// A lock for short critical sections, over [`RawSpin`].
#[cfg(not(async_stack_loom))]
pub(crate) struct SpinLock<T> {
    raw: RawSpin,
    value: std::cell::UnsafeCell<T>,
}

/// Loom's mutex (see the module's docs).
#[cfg(async_stack_loom)]
pub(crate) struct SpinLock<T> {
    value: loom::sync::Mutex<T>,
}

// SAFETY: the value is reached only through a guard, and at most one guard
// exists at a time (`RawSpin` orders the guards' accesses: acquire when
// taken, release when released), so sharing the lock shares `T` between
// threads one at a time: `T: Send` suffices, as for `std::sync::Mutex`.
#[cfg(not(async_stack_loom))]
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// The lock held; released when dropped.
#[cfg(not(async_stack_loom))]
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

#[cfg(async_stack_loom)]
pub(crate) type SpinGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(async_stack_loom))]
        return SpinLock {
            raw: RawSpin::new(),
            value: std::cell::UnsafeCell::new(value),
        };
        #[cfg(async_stack_loom)]
        return SpinLock {
            value: loom::sync::Mutex::new(value),
        };
    }

    /// Takes the lock.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        #[cfg(not(async_stack_loom))]
        {
            self.raw.lock();
            SpinGuard { lock: self }
        }
        #[cfg(async_stack_loom)]
        crate::shim::lock(&self.value)
    }

    /// Runs `f` on the value, through a unique borrow (no locking
    /// needed).
    pub(crate) fn with_mut<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(not(async_stack_loom))]
        return f(self.value.get_mut());
        #[cfg(async_stack_loom)]
        return f(&mut crate::shim::lock(&self.value));
    }
}

#[cfg(not(async_stack_loom))]
impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other guard, and no
        // reference to the value but through this guard, exists (see
        // `SpinLock`'s `Sync`).
        unsafe { &*self.lock.value.get() }
    }
}

#[cfg(not(async_stack_loom))]
impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes this the only
        // reference through this guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

#[cfg(not(async_stack_loom))]
impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.raw.unlock();
    }
}

impl<T> std::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpinLock").finish_non_exhaustive()
    }
}
