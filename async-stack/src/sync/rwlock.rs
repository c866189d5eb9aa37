//! [`RwLock`]: `tokio::sync::RwLock`, recording its holders and waiters.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::Arc;

use ::tokio::sync as tokio_sync;
use ::tokio::sync::TryLockError;

use crate::sync::acquire::{
    Acquiring, ExclusiveHold, Kept, Listed, SharedHold, inner_mut, new_resource, unwrap_inner,
};
use crate::waits::resource::{Ask, Kind, Owner, Resource};

/// A reader-writer lock: `tokio::sync::RwLock` (fair, write-preferring:
/// a reader queued behind a waiting writer waits for it), with the same
/// methods, recording who holds it and who waits for it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let l = async_stack::sync::RwLock::new(1);
/// {
///     let (a, b) = (l.read().await, l.read().await);
///     assert_eq!(*a + *b, 2);
/// }
/// *l.write().await = 5;
/// assert_eq!(*l.read().await, 5);
/// # }
/// ```
pub struct RwLock<T: ?Sized> {
    resource: Owner,
    inner: Arc<tokio_sync::RwLock<T>>,
}

// SAFETY: `Send` as tokio's `RwLock<T>` is, for `T: Send` (the `Arc` field
// alone would ask `T: Sync` too). Whoever can send an `RwLock` owns it (or
// borrows it mutably), so holds the only reference to `inner`: the only
// clones of that `Arc` are in owned acquire futures and owned guards, and
// each of those also keeps the `RwLock` itself in an `Arc` (`Kept`), which
// owning it or borrowing it mutably rules out. Sending it therefore sends
// the tokio lock alone, with nothing left on this thread that reads the
// value; and every type that shares the value between threads (`&RwLock`,
// `Arc<RwLock>`, the guards) still needs `Sync`, which stays `T: Send +
// Sync`.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}

/// A read lock on an [`RwLock`].
pub struct RwLockReadGuard<'a, T: ?Sized> {
    /// Before `hold`: the read lock is released (waking a writer) before
    /// the hold ends.
    inner: tokio_sync::RwLockReadGuard<'a, T>,
    _hold: SharedHold<&'a Arc<Resource>>,
}

/// A write lock on an [`RwLock`].
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    /// Before `inner`: the hold ends before the lock is handed on.
    _hold: ExclusiveHold<&'a Arc<Resource>>,
    inner: tokio_sync::RwLockWriteGuard<'a, T>,
}

/// A read lock on an [`RwLock`] in an `Arc`.
pub struct OwnedRwLockReadGuard<T: ?Sized> {
    inner: tokio_sync::OwnedRwLockReadGuard<T>,
    _hold: SharedHold<Kept<RwLock<T>>>,
}

/// A write lock on an [`RwLock`] in an `Arc`.
pub struct OwnedRwLockWriteGuard<T: ?Sized> {
    _hold: ExclusiveHold<Kept<RwLock<T>>>,
    inner: tokio_sync::OwnedRwLockWriteGuard<T>,
}

impl<T: ?Sized> Listed for RwLock<T> {
    fn listed(&self) -> &Arc<Resource> {
        &self.resource
    }
}

impl<T> RwLock<T> {
    /// A new unlocked lock; records this call's location as where it was
    /// created.
    ///
    /// ```
    /// let l = async_stack::sync::RwLock::new(5);
    /// assert_eq!(l.into_inner(), 5);
    /// ```
    #[track_caller]
    pub fn new(value: T) -> Self {
        RwLock {
            resource: new_resource(Kind::RwLock),
            inner: Arc::new(tokio_sync::RwLock::new(value)),
        }
    }

    /// A new unlocked lock that lets at most `max_reads` readers in at
    /// once, as tokio's `with_max_readers` (which panics if `max_reads`
    /// is above `u32::MAX >> 3`).
    ///
    /// ```
    /// let l = async_stack::sync::RwLock::with_max_readers(5, 1);
    /// let r = l.try_read().unwrap();
    /// assert!(l.try_read().is_err());
    /// drop(r);
    /// ```
    #[track_caller]
    pub fn with_max_readers(value: T, max_reads: u32) -> Self {
        RwLock {
            resource: new_resource(Kind::RwLock),
            inner: Arc::new(tokio_sync::RwLock::with_max_readers(value, max_reads)),
        }
    }

    /// Consumes the lock, returning the data.
    ///
    /// ```
    /// assert_eq!(async_stack::sync::RwLock::new(2).into_inner(), 2);
    /// ```
    pub fn into_inner(self) -> T {
        unwrap_inner(self.inner).into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading, waiting in tokio's FIFO queue.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = async_stack::sync::RwLock::new(1);
    /// assert_eq!(*l.read().await, 1);
    /// # }
    /// ```
    #[track_caller]
    pub fn read(&self) -> impl Future<Output = RwLockReadGuard<'_, T>> {
        let at = Location::caller();
        Acquiring::new(
            &*self.resource,
            at,
            Ask::Shared(1),
            self.inner.read(),
            |inner, resource, at| RwLockReadGuard {
                inner,
                _hold: SharedHold::new(resource, at, 1),
            },
        )
    }

    /// Locks for writing, waiting in tokio's FIFO queue.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = async_stack::sync::RwLock::new(1);
    /// *l.write().await += 1;
    /// assert_eq!(*l.read().await, 2);
    /// # }
    /// ```
    #[track_caller]
    pub fn write(&self) -> impl Future<Output = RwLockWriteGuard<'_, T>> {
        let at = Location::caller();
        Acquiring::new(
            &*self.resource,
            at,
            Ask::Exclusive,
            self.inner.write(),
            |inner, resource, at| RwLockWriteGuard {
                _hold: ExclusiveHold::new(resource, at),
                inner,
            },
        )
    }

    /// [`read`](Self::read) for a lock in an `Arc`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = std::sync::Arc::new(async_stack::sync::RwLock::new(1));
    /// assert_eq!(*l.clone().read_owned().await, 1);
    /// # }
    /// ```
    #[track_caller]
    pub fn read_owned(self: Arc<Self>) -> impl Future<Output = OwnedRwLockReadGuard<T>> {
        let at = Location::caller();
        let inner = Arc::clone(&self.inner).read_owned();
        Acquiring::new(
            Kept::new(self),
            at,
            Ask::Shared(1),
            inner,
            |inner, resource, at| OwnedRwLockReadGuard {
                inner,
                _hold: SharedHold::new(resource, at, 1),
            },
        )
    }

    /// [`write`](Self::write) for a lock in an `Arc`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = std::sync::Arc::new(async_stack::sync::RwLock::new(1));
    /// *l.clone().write_owned().await = 2;
    /// assert_eq!(*l.read().await, 2);
    /// # }
    /// ```
    #[track_caller]
    pub fn write_owned(self: Arc<Self>) -> impl Future<Output = OwnedRwLockWriteGuard<T>> {
        let at = Location::caller();
        let inner = Arc::clone(&self.inner).write_owned();
        Acquiring::new(
            Kept::new(self),
            at,
            Ask::Exclusive,
            inner,
            |inner, resource, at| OwnedRwLockWriteGuard {
                _hold: ExclusiveHold::new(resource, at),
                inner,
            },
        )
    }

    /// Locks for reading if no writer holds or waits for the lock.
    ///
    /// ```
    /// let l = async_stack::sync::RwLock::new(1);
    /// let w = l.try_write().unwrap();
    /// assert!(l.try_read().is_err());
    /// drop(w);
    /// assert!(l.try_read().is_ok());
    /// ```
    #[track_caller]
    pub fn try_read(&self) -> Result<RwLockReadGuard<'_, T>, TryLockError> {
        let at = Location::caller();
        let inner = self.inner.try_read()?;
        Ok(RwLockReadGuard {
            inner,
            _hold: SharedHold::new(&*self.resource, at, 1),
        })
    }

    /// Locks for writing if the lock is free.
    ///
    /// ```
    /// let l = async_stack::sync::RwLock::new(1);
    /// let r = l.try_read().unwrap();
    /// assert!(l.try_write().is_err());
    /// drop(r);
    /// ```
    #[track_caller]
    pub fn try_write(&self) -> Result<RwLockWriteGuard<'_, T>, TryLockError> {
        let at = Location::caller();
        let inner = self.inner.try_write()?;
        Ok(RwLockWriteGuard {
            _hold: ExclusiveHold::new(&*self.resource, at),
            inner,
        })
    }

    /// [`try_read`](Self::try_read) for a lock in an `Arc`.
    ///
    /// ```
    /// let l = std::sync::Arc::new(async_stack::sync::RwLock::new(1));
    /// let r = l.clone().try_read_owned().unwrap();
    /// assert!(l.try_write().is_err());
    /// drop(r);
    /// ```
    #[track_caller]
    pub fn try_read_owned(self: Arc<Self>) -> Result<OwnedRwLockReadGuard<T>, TryLockError> {
        let at = Location::caller();
        let inner = Arc::clone(&self.inner).try_read_owned()?;
        Ok(OwnedRwLockReadGuard {
            inner,
            _hold: SharedHold::new(Kept::new(self), at, 1),
        })
    }

    /// [`try_write`](Self::try_write) for a lock in an `Arc`.
    ///
    /// ```
    /// let l = std::sync::Arc::new(async_stack::sync::RwLock::new(1));
    /// let w = l.clone().try_write_owned().unwrap();
    /// assert!(l.try_read().is_err());
    /// drop(w);
    /// ```
    #[track_caller]
    pub fn try_write_owned(self: Arc<Self>) -> Result<OwnedRwLockWriteGuard<T>, TryLockError> {
        let at = Location::caller();
        let inner = Arc::clone(&self.inner).try_write_owned()?;
        Ok(OwnedRwLockWriteGuard {
            _hold: ExclusiveHold::new(Kept::new(self), at),
            inner,
        })
    }

    /// Locks for reading from synchronous code, blocking the thread, as
    /// tokio's `blocking_read` does (and, like it, panics when called
    /// inside an async runtime). The hold is recorded as one outside any
    /// traced task.
    ///
    /// ```
    /// let l = async_stack::sync::RwLock::new(1);
    /// assert_eq!(*l.blocking_read(), 1);
    /// ```
    #[track_caller]
    pub fn blocking_read(&self) -> RwLockReadGuard<'_, T> {
        let at = Location::caller();
        let inner = self.inner.blocking_read();
        RwLockReadGuard {
            inner,
            _hold: SharedHold::new(&*self.resource, at, 1),
        }
    }

    /// Locks for writing from synchronous code, blocking the thread, as
    /// tokio's `blocking_write` does (and, like it, panics when called
    /// inside an async runtime).
    ///
    /// ```
    /// let l = async_stack::sync::RwLock::new(1);
    /// *l.blocking_write() = 2;
    /// assert_eq!(l.into_inner(), 2);
    /// ```
    #[track_caller]
    pub fn blocking_write(&self) -> RwLockWriteGuard<'_, T> {
        let at = Location::caller();
        let inner = self.inner.blocking_write();
        RwLockWriteGuard {
            _hold: ExclusiveHold::new(&*self.resource, at),
            inner,
        }
    }

    /// The data, through a unique borrow.
    ///
    /// ```
    /// let mut l = async_stack::sync::RwLock::new(1);
    /// *l.get_mut() = 3;
    /// assert_eq!(l.into_inner(), 3);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        inner_mut(&mut self.inner).get_mut()
    }
}

impl<T: Default> Default for RwLock<T> {
    #[track_caller]
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    #[track_caller]
    fn from(value: T) -> Self {
        RwLock::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Turns the write lock into a read lock without letting a writer in
    /// (tokio's `downgrade`); this call's location is where the read lock
    /// was acquired.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = async_stack::sync::RwLock::new(1);
    /// let mut w = l.write().await;
    /// *w = 2;
    /// let r = w.downgrade();
    /// assert_eq!((*r, *l.try_read().unwrap()), (2, 2));
    /// # }
    /// ```
    #[track_caller]
    pub fn downgrade(self) -> RwLockReadGuard<'a, T> {
        let RwLockWriteGuard {
            _hold: write,
            inner,
        } = self;
        let read = write.downgrade(Location::caller());
        RwLockReadGuard {
            inner: inner.downgrade(),
            _hold: read,
        }
    }
}

impl<T: ?Sized> OwnedRwLockReadGuard<T> {
    /// The lock the guard reads (which it keeps alive); an associated
    /// function, as tokio's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use async_stack::sync::{OwnedRwLockReadGuard, RwLock};
    /// use std::sync::Arc;
    /// let l = Arc::new(RwLock::new(1));
    /// let r = l.clone().read_owned().await;
    /// assert!(Arc::ptr_eq(OwnedRwLockReadGuard::rwlock(&r), &l));
    /// # }
    /// ```
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        this._hold.kept().lock()
    }
}

impl<T: ?Sized> OwnedRwLockWriteGuard<T> {
    /// The lock the guard writes (which it keeps alive); an associated
    /// function, as tokio's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use async_stack::sync::{OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    /// let l = Arc::new(RwLock::new(1));
    /// let w = l.clone().write_owned().await;
    /// assert!(Arc::ptr_eq(OwnedRwLockWriteGuard::rwlock(&w), &l));
    /// # }
    /// ```
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        this._hold.kept().lock()
    }

    /// [`RwLockWriteGuard::downgrade`] for an owned guard.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let l = std::sync::Arc::new(async_stack::sync::RwLock::new(1));
    /// let r = l.clone().write_owned().await.downgrade();
    /// assert_eq!(*r, 1);
    /// assert!(l.try_write().is_err());
    /// # }
    /// ```
    #[track_caller]
    pub fn downgrade(self) -> OwnedRwLockReadGuard<T> {
        let OwnedRwLockWriteGuard {
            _hold: write,
            inner,
        } = self;
        let read = write.downgrade(Location::caller());
        OwnedRwLockReadGuard {
            inner: inner.downgrade(),
            _hold: read,
        }
    }
}

macro_rules! read_guard_impls {
    ($guard:ident $(<$l:lifetime>)?) => {
        impl<$($l,)? T: ?Sized> Deref for $guard<$($l,)? T> {
            type Target = T;
            fn deref(&self) -> &T {
                &self.inner
            }
        }
        impl<$($l,)? T: ?Sized + fmt::Debug> fmt::Debug for $guard<$($l,)? T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.inner, f)
            }
        }
        impl<$($l,)? T: ?Sized + fmt::Display> fmt::Display for $guard<$($l,)? T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&*self.inner, f)
            }
        }
    };
}

read_guard_impls!(RwLockReadGuard<'a>);
read_guard_impls!(OwnedRwLockReadGuard);
crate::sync::mutex::guard_impls!(RwLockWriteGuard<'a>);
crate::sync::mutex::guard_impls!(OwnedRwLockWriteGuard);
