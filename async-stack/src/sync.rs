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
