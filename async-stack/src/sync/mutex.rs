//! [`Mutex`]: `tokio::sync::Mutex`, recording its holder and waiters.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::Arc;

use ::tokio::sync as tokio_sync;
pub use ::tokio::sync::TryLockError;

use crate::sync::acquire::{
    Acquiring, ExclusiveHold, Kept, Listed, inner_mut, new_resource, unwrap_inner,
};
use crate::waits::resource::{Ask, Kind, Owner, Resource};

/// An asynchronous mutex: `tokio::sync::Mutex`, with the same methods,
/// that records who holds it and who waits for it, for
/// [`deadlocks()`](crate::waits::report::deadlocks) and dumps.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use async_stack::sync::Mutex;
///
/// let m = Mutex::new(1);
/// *m.lock().await += 1;
/// assert_eq!(*m.lock().await, 2);
/// # }
/// ```
pub struct Mutex<T: ?Sized> {
    resource: Owner,
    inner: Arc<tokio_sync::Mutex<T>>,
}

/// A lock on a [`Mutex`]: derefs to the data; dropping it unlocks.
pub struct MutexGuard<'a, T: ?Sized> {
    /// Before `inner`: the hold ends before the lock is handed on.
    _hold: ExclusiveHold<&'a Arc<Resource>>,
    inner: tokio_sync::MutexGuard<'a, T>,
}

/// A lock on a [`Mutex`] in an `Arc`, from [`Mutex::lock_owned`].
pub struct OwnedMutexGuard<T: ?Sized> {
    _hold: ExclusiveHold<Kept<Mutex<T>>>,
    inner: tokio_sync::OwnedMutexGuard<T>,
}

impl<T: ?Sized> Listed for Mutex<T> {
    fn listed(&self) -> &Arc<Resource> {
        &self.resource
    }
}

impl<T> Mutex<T> {
    /// A new unlocked mutex; records this call's location as where it was
    /// created.
    ///
    /// ```
    /// let m = async_stack::sync::Mutex::new(5);
    /// assert_eq!(m.into_inner(), 5);
    /// ```
    #[track_caller]
    pub fn new(value: T) -> Self {
        Mutex {
            resource: new_resource(Kind::Mutex),
            inner: Arc::new(tokio_sync::Mutex::new(value)),
        }
    }

    /// Consumes the mutex, returning the data.
    ///
    /// ```
    /// let m = async_stack::sync::Mutex::new("a");
    /// assert_eq!(m.into_inner(), "a");
    /// ```
    pub fn into_inner(self) -> T {
        unwrap_inner(self.inner).into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, waiting in tokio's FIFO queue. This call's
    /// location is where the task waits and where it acquired the lock.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let m = async_stack::sync::Mutex::new(0);
    /// *m.lock().await = 3;
    /// assert_eq!(*m.lock().await, 3);
    /// # }
    /// ```
    #[track_caller]
    pub fn lock(&self) -> impl Future<Output = MutexGuard<'_, T>> {
        let at = Location::caller();
        Acquiring::new(
            &*self.resource,
            at,
            Ask::Exclusive,
            self.inner.lock(),
            |inner, resource, at| MutexGuard {
                _hold: ExclusiveHold::new(resource, at),
                inner,
            },
        )
    }

    /// Locks the mutex if it is free.
    ///
    /// ```
    /// let m = async_stack::sync::Mutex::new(1);
    /// let g = m.try_lock().unwrap();
    /// assert!(m.try_lock().is_err());
    /// drop(g);
    /// ```
    #[track_caller]
    pub fn try_lock(&self) -> Result<MutexGuard<'_, T>, TryLockError> {
        let at = Location::caller();
        let inner = self.inner.try_lock()?;
        Ok(MutexGuard {
            _hold: ExclusiveHold::new(&*self.resource, at),
            inner,
        })
    }

    /// Locks the mutex from synchronous code, blocking the thread until
    /// it is free, as tokio's `blocking_lock` does (and, like it, panics
    /// when called inside an async runtime). The hold is recorded as one
    /// outside any traced task.
    ///
    /// ```
    /// let m = std::sync::Arc::new(async_stack::sync::Mutex::new(1));
    /// let m2 = m.clone();
    /// std::thread::spawn(move || *m2.blocking_lock() += 1).join().unwrap();
    /// assert_eq!(*m.blocking_lock(), 2);
    /// ```
    #[track_caller]
    pub fn blocking_lock(&self) -> MutexGuard<'_, T> {
        let at = Location::caller();
        let inner = self.inner.blocking_lock();
        MutexGuard {
            _hold: ExclusiveHold::new(&*self.resource, at),
            inner,
        }
    }

    /// [`blocking_lock`](Self::blocking_lock) for a mutex in an `Arc`.
    ///
    /// ```
    /// let m = std::sync::Arc::new(async_stack::sync::Mutex::new(1));
    /// let g = m.clone().blocking_lock_owned();
    /// assert!(m.try_lock().is_err());
    /// drop(g);
    /// ```
    #[track_caller]
    pub fn blocking_lock_owned(self: Arc<Self>) -> OwnedMutexGuard<T> {
        let at = Location::caller();
        let inner = Arc::clone(&self.inner).blocking_lock_owned();
        OwnedMutexGuard {
            _hold: ExclusiveHold::new(Kept::new(self), at),
            inner,
        }
    }

    /// Locks a mutex in an `Arc`, for a guard that owns it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::sync::Arc;
    /// let m = Arc::new(async_stack::sync::Mutex::new(1));
    /// let g = m.clone().lock_owned().await;
    /// assert_eq!(*g, 1);
    /// # }
    /// ```
    #[track_caller]
    pub fn lock_owned(self: Arc<Self>) -> impl Future<Output = OwnedMutexGuard<T>> {
        let at = Location::caller();
        let inner = Arc::clone(&self.inner).lock_owned();
        Acquiring::new(
            Kept::new(self),
            at,
            Ask::Exclusive,
            inner,
            |inner, resource, at| OwnedMutexGuard {
                _hold: ExclusiveHold::new(resource, at),
                inner,
            },
        )
    }

    /// [`lock_owned`](Self::lock_owned) if the mutex is free.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let m = Arc::new(async_stack::sync::Mutex::new(1));
    /// assert!(m.clone().try_lock_owned().is_ok());
    /// ```
    #[track_caller]
    pub fn try_lock_owned(self: Arc<Self>) -> Result<OwnedMutexGuard<T>, TryLockError> {
        let at = Location::caller();
        let inner = Arc::clone(&self.inner).try_lock_owned()?;
        Ok(OwnedMutexGuard {
            _hold: ExclusiveHold::new(Kept::new(self), at),
            inner,
        })
    }

    /// The data, through a unique borrow (no locking needed).
    ///
    /// ```
    /// let mut m = async_stack::sync::Mutex::new(1);
    /// *m.get_mut() = 2;
    /// assert_eq!(m.into_inner(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        inner_mut(&mut self.inner).get_mut()
    }

    /// Its record in the waits-for graph.
    #[cfg(test)]
    pub(crate) fn resource(&self) -> &Arc<Resource> {
        &self.resource
    }
}

impl<T: ?Sized> OwnedMutexGuard<T> {
    /// The mutex the guard locks (which it keeps alive); an associated
    /// function, as tokio's, so as not to hide a method of `T`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use async_stack::sync::{Mutex, OwnedMutexGuard};
    /// use std::sync::Arc;
    /// let m = Arc::new(Mutex::new(1));
    /// let g = m.clone().lock_owned().await;
    /// assert!(Arc::ptr_eq(OwnedMutexGuard::mutex(&g), &m));
    /// # }
    /// ```
    pub fn mutex(this: &Self) -> &Arc<Mutex<T>> {
        this._hold.kept().lock()
    }
}

impl<T: Default> Default for Mutex<T> {
    #[track_caller]
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    #[track_caller]
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

macro_rules! guard_impls {
    ($guard:ident $(<$l:lifetime>)?) => {
        impl<$($l,)? T: ?Sized> Deref for $guard<$($l,)? T> {
            type Target = T;
            fn deref(&self) -> &T {
                &self.inner
            }
        }
        impl<$($l,)? T: ?Sized> DerefMut for $guard<$($l,)? T> {
            fn deref_mut(&mut self) -> &mut T {
                &mut self.inner
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
pub(crate) use guard_impls;

guard_impls!(MutexGuard<'a>);
guard_impls!(OwnedMutexGuard);
