//! Drop-in wrappers of `tokio::sync`'s `Mutex`, `RwLock` and `Semaphore`
//! that record who holds them and who waits for them (the waits-for graph
//! of the `waits` module), so that [`deadlocks()`](crate::waits::report::deadlocks)
//! can name both sides of a deadlock with their lines.
//!
//! Each wraps the tokio type and forwards every call to it: same queues,
//! same fairness, same errors. Around the call, an uncontended acquire
//! stores its holder in a few atomic words (shared holds: a short list
//! under the resource's own lock); a wait is recorded when the acquire's
//! first poll returns `Pending`, and removed when it is granted or its
//! future is dropped. `#[track_caller]` gives each record its line: `new`
//! the creation site, `lock`/`read`/`write`/`acquire` the waiting and
//! acquired-at site.
//!
//! A guard moved to another task still counts as its acquirer's.

pub(crate) mod acquire;
pub mod mutex;
pub mod rwlock;
pub mod semaphore;
#[cfg(test)]
mod tests;

pub use mutex::{Mutex, MutexGuard, OwnedMutexGuard};
pub use rwlock::{
    OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
pub use semaphore::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};
