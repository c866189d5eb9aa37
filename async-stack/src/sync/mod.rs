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
//! A guard moved to another task still counts as its acquirer's; a wait
//! counts as the wait of whichever task polls the acquire future, at the
//! `.await` that polls it, and only while that task is suspended there:
//! an acquire raced in `select!` on `&mut` and kept after another branch
//! won keeps its place in the queue, but is no wait of its task's once
//! the task went on elsewhere. The same holds for a `#[traced_async]` fn
//! kept that way: its own frame stays at the acquire's `.await`, but the
//! frames above it moved on, and the wait lasts only under the frames it
//! was polled under.
//!
//! # Differences from `tokio::sync`
//!
//! What a program can tell apart, besides the records (each found by
//! comparing the two, see `tests/tests/sync_like_tokio.rs`):
//!
//! - No `const_new`: [`Mutex::new`](crate::sync::Mutex::new) and the
//!   others record where they were created and allocate the lock's
//!   record, which a `const fn` cannot.
//! - No unsized data: tokio's `Mutex<dyn Trait>` (by unsized coercion of
//!   an `Arc<Mutex<T>>`) has no equivalent, as the wrapper keeps tokio's
//!   lock in an `Arc`.
//! - Not offered: the guards' `map`, `try_map` and `into_mapped` (and the
//!   mapped guard types), the borrowed guards' `mutex()`/`rwlock()` (the
//!   owned ones have them), `SemaphorePermit::split`/`merge`/`semaphore`,
//!   `OwnedSemaphorePermit::merge`, and `Semaphore::blocking_acquire*`.
//!   Use tokio's type where a program needs one of these; its waits are
//!   then not recorded.

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
