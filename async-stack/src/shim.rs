//! The one switch between `std` and `loom` synchronisation primitives.
//!
//! Everything in this crate that another thread may read concurrently goes
//! through these re-exports, so the loom models (`cfg(async_stack_loom)`)
//! exercise exactly the code that ships.

#[cfg(not(async_stack_loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(async_stack_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(async_stack_loom)]
pub(crate) use loom::sync::atomic::{
    AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(async_stack_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// Locks a mutex, recovering the data if a previous holder panicked.
///
/// Every structure guarded by a mutex in this crate stays valid across a
/// panic (each critical section is a single push, pop or insert), so
/// poisoning carries no information for us.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// [`lock`] for a `std` mutex loom does not model: a `static` (loom's
/// mutexes cannot be one) or one only plain `std` threads share.
pub(crate) fn lock_std<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Asks the processor to bring the cache line holding `p` closer. Only a
/// hint: it never faults and has no effect a program can observe (on
/// targets without the instruction it does nothing).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` reads nothing architecturally and cannot fault,
    // whatever the address; SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
