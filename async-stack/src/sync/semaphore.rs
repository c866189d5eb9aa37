//! [`Semaphore`]: `tokio::sync::Semaphore`, recording its permit holders
//! and waiters.

use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::sync::Arc;

use ::tokio::sync as tokio_sync;
pub use ::tokio::sync::{AcquireError, TryAcquireError};

use crate::sync::acquire::{Acquiring, Kept, Listed, SharedHold, new_resource};
use crate::waits::resource::{Ask, Kind, Owner, Resource};

/// A counting semaphore: `tokio::sync::Semaphore` (fair: FIFO), with the
/// same methods, recording which tasks hold permits and which wait.
///
/// A waiter is counted as released by any holder of permits (and by the
/// tasks queued ahead of it); permits added by [`add_permits`] from a
/// task that holds none are not foreseen.
///
/// [`add_permits`]: Semaphore::add_permits
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let s = async_stack::sync::Semaphore::new(2);
/// let a = s.acquire().await.unwrap();
/// let b = s.acquire().await.unwrap();
/// assert_eq!(s.available_permits(), 0);
/// drop((a, b));
/// assert_eq!(s.available_permits(), 2);
/// # }
/// ```
pub struct Semaphore {
    resource: Owner,
    inner: Arc<tokio_sync::Semaphore>,
}

/// Permits of a [`Semaphore`]; dropping them gives them back.
pub struct SemaphorePermit<'a> {
    /// Before `hold`: the permits go back (to the next waiter, woken)
    /// before the hold ends.
    inner: tokio_sync::SemaphorePermit<'a>,
    hold: SharedHold<&'a Arc<Resource>>,
}

/// Permits of a [`Semaphore`] in an `Arc`.
pub struct OwnedSemaphorePermit {
    inner: tokio_sync::OwnedSemaphorePermit,
    hold: SharedHold<Kept<Semaphore>>,
}

impl Listed for Semaphore {
    fn listed(&self) -> &Arc<Resource> {
        &self.resource
    }
}

impl Semaphore {
    /// The most permits a semaphore can hold (tokio's).
    pub const MAX_PERMITS: usize = tokio_sync::Semaphore::MAX_PERMITS;

    /// A semaphore with `permits` permits; records this call's location
    /// as where it was created.
    ///
    /// ```
    /// let s = async_stack::sync::Semaphore::new(3);
    /// assert_eq!(s.available_permits(), 3);
    /// ```
    #[track_caller]
    pub fn new(permits: usize) -> Self {
        Semaphore {
            resource: new_resource(Kind::Semaphore),
            inner: Arc::new(tokio_sync::Semaphore::new(permits)),
        }
    }

    /// Permits available now.
    ///
    /// ```
    /// assert_eq!(async_stack::sync::Semaphore::new(1).available_permits(), 1);
    /// ```
    pub fn available_permits(&self) -> usize {
        self.inner.available_permits()
    }

    /// Adds `n` permits (waking waiters in queue order).
    ///
    /// ```
    /// let s = async_stack::sync::Semaphore::new(0);
    /// s.add_permits(2);
    /// assert_eq!(s.available_permits(), 2);
    /// ```
    pub fn add_permits(&self, n: usize) {
        self.inner.add_permits(n);
    }

    /// Removes up to `n` available permits; returns how many.
    ///
    /// ```
    /// let s = async_stack::sync::Semaphore::new(3);
    /// assert_eq!(s.forget_permits(2), 2);
    /// ```
    pub fn forget_permits(&self, n: usize) -> usize {
        self.inner.forget_permits(n)
    }

    /// Closes the semaphore: waiters and later acquires fail.
    ///
    /// ```
    /// let s = async_stack::sync::Semaphore::new(1);
    /// s.close();
    /// assert!(s.is_closed() && s.try_acquire().is_err());
    /// ```
    pub fn close(&self) {
        self.inner.close();
    }

    /// Whether [`close`](Self::close) was called.
    ///
    /// ```
    /// assert!(!async_stack::sync::Semaphore::new(1).is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Acquires one permit, waiting in tokio's FIFO queue.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let s = async_stack::sync::Semaphore::new(1);
    /// let p = s.acquire().await.unwrap();
    /// assert_eq!(p.num_permits(), 1);
    /// # }
    /// ```
    #[track_caller]
    pub fn acquire(&self) -> impl Future<Output = Result<SemaphorePermit<'_>, AcquireError>> {
        self.acquire_n(Location::caller(), 1)
    }

    /// Acquires `n` permits, waiting in tokio's FIFO queue.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let s = async_stack::sync::Semaphore::new(3);
    /// let p = s.acquire_many(2).await.unwrap();
    /// assert_eq!((p.num_permits(), s.available_permits()), (2, 1));
    /// # }
    /// ```
    #[track_caller]
    pub fn acquire_many(
        &self,
        n: u32,
    ) -> impl Future<Output = Result<SemaphorePermit<'_>, AcquireError>> {
        self.acquire_n(Location::caller(), n)
    }

    fn acquire_n(
        &self,
        at: &'static Location<'static>,
        n: u32,
    ) -> impl Future<Output = Result<SemaphorePermit<'_>, AcquireError>> {
        Acquiring::new(
            &*self.resource,
            at,
            Ask::Shared(n),
            self.inner.acquire_many(n),
            move |out, resource, at| {
                let inner = out?;
                Ok(SemaphorePermit {
                    inner,
                    hold: SharedHold::new(resource, at, n),
                })
            },
        )
    }

    /// [`acquire`](Self::acquire) for a semaphore in an `Arc`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let s = std::sync::Arc::new(async_stack::sync::Semaphore::new(1));
    /// let p = s.clone().acquire_owned().await.unwrap();
    /// assert_eq!(p.num_permits(), 1);
    /// # }
    /// ```
    #[track_caller]
    pub fn acquire_owned(
        self: Arc<Self>,
    ) -> impl Future<Output = Result<OwnedSemaphorePermit, AcquireError>> {
        self.acquire_many_owned_at(Location::caller(), 1)
    }

    /// [`acquire_many`](Self::acquire_many) for a semaphore in an `Arc`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let s = std::sync::Arc::new(async_stack::sync::Semaphore::new(2));
    /// let p = s.clone().acquire_many_owned(2).await.unwrap();
    /// assert_eq!(p.num_permits(), 2);
    /// # }
    /// ```
    #[track_caller]
    pub fn acquire_many_owned(
        self: Arc<Self>,
        n: u32,
    ) -> impl Future<Output = Result<OwnedSemaphorePermit, AcquireError>> {
        self.acquire_many_owned_at(Location::caller(), n)
    }

    fn acquire_many_owned_at(
        self: Arc<Self>,
        at: &'static Location<'static>,
        n: u32,
    ) -> impl Future<Output = Result<OwnedSemaphorePermit, AcquireError>> {
        let inner = Arc::clone(&self.inner).acquire_many_owned(n);
        Acquiring::new(
            Kept::new(self),
            at,
            Ask::Shared(n),
            inner,
            move |out, resource, at| {
                let inner = out?;
                Ok(OwnedSemaphorePermit {
                    inner,
                    hold: SharedHold::new(resource, at, n),
                })
            },
        )
    }

    /// One permit, if available now.
    ///
    /// ```
    /// let s = async_stack::sync::Semaphore::new(1);
    /// let p = s.try_acquire().unwrap();
    /// assert!(s.try_acquire().is_err());
    /// drop(p);
    /// ```
    #[track_caller]
    pub fn try_acquire(&self) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.try_acquire_many_at(Location::caller(), 1)
    }

    /// `n` permits, if available now.
    ///
    /// ```
    /// let s = async_stack::sync::Semaphore::new(2);
    /// assert!(s.try_acquire_many(3).is_err());
    /// assert!(s.try_acquire_many(2).is_ok());
    /// ```
    #[track_caller]
    pub fn try_acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.try_acquire_many_at(Location::caller(), n)
    }

    fn try_acquire_many_at(
        &self,
        at: &'static Location<'static>,
        n: u32,
    ) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        let inner = self.inner.try_acquire_many(n)?;
        Ok(SemaphorePermit {
            inner,
            hold: SharedHold::new(&*self.resource, at, n),
        })
    }

    /// [`try_acquire`](Self::try_acquire) for a semaphore in an `Arc`.
    ///
    /// ```
    /// let s = std::sync::Arc::new(async_stack::sync::Semaphore::new(1));
    /// assert!(s.clone().try_acquire_owned().is_ok());
    /// ```
    #[track_caller]
    pub fn try_acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        self.try_acquire_many_owned_at(Location::caller(), 1)
    }

    /// [`try_acquire_many`](Self::try_acquire_many) for a semaphore in an
    /// `Arc`.
    ///
    /// ```
    /// let s = std::sync::Arc::new(async_stack::sync::Semaphore::new(2));
    /// assert!(s.clone().try_acquire_many_owned(2).is_ok());
    /// ```
    #[track_caller]
    pub fn try_acquire_many_owned(
        self: Arc<Self>,
        n: u32,
    ) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        self.try_acquire_many_owned_at(Location::caller(), n)
    }

    fn try_acquire_many_owned_at(
        self: Arc<Self>,
        at: &'static Location<'static>,
        n: u32,
    ) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        let inner = Arc::clone(&self.inner).try_acquire_many_owned(n)?;
        Ok(OwnedSemaphorePermit {
            inner,
            hold: SharedHold::new(Kept::new(self), at, n),
        })
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl SemaphorePermit<'_> {
    /// The permits this holds.
    ///
    /// ```
    /// let s = async_stack::sync::Semaphore::new(2);
    /// assert_eq!(s.try_acquire_many(2).unwrap().num_permits(), 2);
    /// ```
    pub fn num_permits(&self) -> usize {
        self.inner.num_permits()
    }

    /// Keeps the permits out of the semaphore for good (the hold ends).
    ///
    /// ```
    /// let s = async_stack::sync::Semaphore::new(1);
    /// s.try_acquire().unwrap().forget();
    /// assert_eq!(s.available_permits(), 0);
    /// ```
    pub fn forget(self) {
        let SemaphorePermit { inner, hold } = self;
        inner.forget();
        drop(hold);
    }
}

impl OwnedSemaphorePermit {
    /// The permits this holds.
    ///
    /// ```
    /// let s = std::sync::Arc::new(async_stack::sync::Semaphore::new(2));
    /// assert_eq!(s.try_acquire_many_owned(2).unwrap().num_permits(), 2);
    /// ```
    pub fn num_permits(&self) -> usize {
        self.inner.num_permits()
    }

    /// Keeps the permits out of the semaphore for good (the hold ends).
    ///
    /// ```
    /// let s = std::sync::Arc::new(async_stack::sync::Semaphore::new(1));
    /// s.clone().try_acquire_owned().unwrap().forget();
    /// assert_eq!(s.available_permits(), 0);
    /// ```
    pub fn forget(self) {
        let OwnedSemaphorePermit { inner, hold } = self;
        inner.forget();
        drop(hold);
    }

    /// The semaphore the permits are from (which the permit keeps alive).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let s = Arc::new(async_stack::sync::Semaphore::new(1));
    /// let p = s.clone().try_acquire_owned().unwrap();
    /// assert!(Arc::ptr_eq(p.semaphore(), &s));
    /// ```
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        self.hold.kept().lock()
    }

    /// Splits `n` permits off into a permit of their own, if this holds at
    /// least `n`.
    ///
    /// ```
    /// let s = std::sync::Arc::new(async_stack::sync::Semaphore::new(3));
    /// let mut p = s.try_acquire_many_owned(3).unwrap();
    /// let q = p.split(1).unwrap();
    /// assert_eq!((p.num_permits(), q.num_permits()), (2, 1));
    /// ```
    #[track_caller]
    pub fn split(&mut self, n: usize) -> Option<OwnedSemaphorePermit> {
        let n32 = u32::try_from(n).ok()?;
        let inner = self.inner.split(n)?;
        self.hold.resize(self.inner.num_permits() as u32);
        Some(OwnedSemaphorePermit {
            inner,
            hold: SharedHold::new(self.hold.kept().clone(), Location::caller(), n32),
        })
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl fmt::Debug for OwnedSemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}
