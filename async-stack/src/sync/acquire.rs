//! The pieces every wrapper shares: the acquire future that records a
//! wait from its first `Pending` to its end, and the hold records that
//! guards end when dropped.

use std::borrow::Borrow;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::task::record::layout::current_task_id;
use crate::waits::resource::{
    Ask, Kind, Owner, Registry, Resource, SharedPlace, WaitRecord, stamp,
};
use crate::waits::waiter::Waiter;

/// A wrapper's resource: of `kind`, created at the caller's location, in
/// the process's registry, owned by the wrapper (listed from its first
/// wait until the wrapper is dropped).
#[track_caller]
pub(crate) fn new_resource(kind: Kind) -> Owner {
    Owner::new(Resource::new(kind, Location::caller(), Registry::global()))
}

/// A wrapper (a lock), as its owned futures and guards see it: its
/// resource.
pub(crate) trait Listed {
    fn listed(&self) -> &Arc<Resource>;
}

/// What an owned acquire future and its guard keep of a lock in an `Arc`:
/// the lock itself, as tokio's owned futures and guards keep theirs, so
/// that the lock cannot be taken out of its `Arc` (`Arc::try_unwrap`,
/// `Arc::get_mut`, and so `into_inner` and `get_mut`) while they live.
/// Borrowed as the lock's resource.
pub(crate) struct Kept<L: ?Sized>(Arc<L>);

impl<L: ?Sized> Kept<L> {
    pub(crate) fn new(lock: Arc<L>) -> Self {
        Kept(lock)
    }

    /// The lock kept.
    pub(crate) fn lock(&self) -> &Arc<L> {
        &self.0
    }
}

impl<L: ?Sized + Listed> Borrow<Arc<Resource>> for Kept<L> {
    #[inline]
    fn borrow(&self) -> &Arc<Resource> {
        self.0.listed()
    }
}

impl<L: ?Sized> Clone for Kept<L> {
    fn clone(&self) -> Self {
        Kept(Arc::clone(&self.0))
    }
}

impl<L: ?Sized> std::fmt::Debug for Kept<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept").finish_non_exhaustive()
    }
}

/// The tokio type a wrapper keeps in an `Arc`, taken out of it. Only the
/// owned futures and guards clone that `Arc`, and each keeps an `Arc` of
/// the wrapper ([`Kept`]), which a wrapper taken by value (or by `&mut`)
/// rules out.
pub(crate) fn unwrap_inner<T>(inner: Arc<T>) -> T {
    match Arc::try_unwrap(inner) {
        Ok(t) => t,
        Err(_) => unreachable!("an owned guard outlived its lock"),
    }
}

/// [`unwrap_inner`] for a unique borrow.
pub(crate) fn inner_mut<T: ?Sized>(inner: &mut Arc<T>) -> &mut T {
    match Arc::get_mut(inner) {
        Some(t) => t,
        None => unreachable!("an owned guard outlived its lock"),
    }
}

/// The traced root polled now, or the unknown task `0`.
#[inline]
pub(crate) fn current_task() -> u64 {
    current_task_id().unwrap_or(0)
}

/// Polls a tokio acquire future, recording a wait while it is queued, and
/// turns what it gives into the wrapper's guard with `finish` (which
/// records the hold), all in one future: no second state machine around
/// tokio's.
#[pin_project::pin_project]
#[derive(Debug)]
pub(crate) struct Acquiring<R, F, M> {
    /// Declared first: dropped (the wait ended) before `inner` leaves
    /// tokio's queue, so no recorded wait outlives its queue entry.
    wait: Option<WaitRecord>,
    #[pin]
    inner: F,
    /// Taken by `finish` when `inner` is ready.
    resource: Option<R>,
    at: &'static Location<'static>,
    ask: Ask,
    finish: M,
}

impl<R: Borrow<Arc<Resource>>, F: Future, M> Acquiring<R, F, M> {
    pub(crate) fn new<G>(
        resource: R,
        at: &'static Location<'static>,
        ask: Ask,
        inner: F,
        finish: M,
    ) -> Self
    where
        M: Fn(F::Output, R, &'static Location<'static>) -> G,
    {
        Acquiring {
            wait: None,
            inner,
            resource: Some(resource),
            at,
            ask,
            finish,
        }
    }
}

impl<R, F, M, G> Future for Acquiring<R, F, M>
where
    R: Borrow<Arc<Resource>>,
    F: Future,
    M: Fn(F::Output, R, &'static Location<'static>) -> G,
{
    type Output = G;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<G> {
        let this = self.project();
        match this.inner.poll(cx) {
            Poll::Ready(out) => {
                *this.wait = None;
                let resource = this
                    .resource
                    .take()
                    .expect("an acquire future polled after it completed");
                Poll::Ready((this.finish)(out, resource, this.at))
            }
            Poll::Pending => {
                match this.wait {
                    // The task that polls it waits, even if it is not the
                    // one that first did (the future was moved), at the
                    // `.await` that polls it now.
                    Some(wait) => wait.follow(Waiter::now()),
                    None => {
                        if let Some(resource) = this.resource.as_ref() {
                            let at: &'static Location<'static> = this.at;
                            start(this.wait, resource.borrow(), at, *this.ask);
                        }
                    }
                }
                Poll::Pending
            }
        }
    }
}

#[cold]
#[inline(never)]
fn start(
    wait: &mut Option<WaitRecord>,
    resource: &Arc<Resource>,
    at: &'static Location<'static>,
    ask: Ask,
) {
    *wait = Some(WaitRecord::start(resource, Waiter::now(), Some(at), ask));
}

/// An exclusive hold; dropping it ends the hold. A guard declares it
/// before the tokio guard, so the hold ends before the resource is handed
/// on.
#[derive(Debug)]
pub(crate) struct ExclusiveHold<R: Borrow<Arc<Resource>>> {
    resource: R,
}

impl<R: Borrow<Arc<Resource>>> ExclusiveHold<R> {
    /// Records the current task as the holder.
    #[inline]
    pub(crate) fn new(resource: R, at: &'static Location<'static>) -> Self {
        let task = current_task();
        resource.borrow().exclusive.acquire(task, at, stamp(task));
        ExclusiveHold { resource }
    }

    /// What the hold keeps of the resource (for an owned guard: its lock).
    pub(crate) fn kept(&self) -> &R {
        &self.resource
    }
}

impl<R: Borrow<Arc<Resource>> + Clone> ExclusiveHold<R> {
    /// Turns the hold into a shared hold of one permit (an `RwLock`'s
    /// downgrade), recorded first, so the resource is never seen free
    /// meanwhile.
    pub(crate) fn downgrade(self, at: &'static Location<'static>) -> SharedHold<R> {
        let read = SharedHold::new(self.resource.clone(), at, 1);
        drop(self);
        read
    }
}

impl<R: Borrow<Arc<Resource>>> Drop for ExclusiveHold<R> {
    #[inline]
    fn drop(&mut self) {
        self.resource.borrow().exclusive.release();
    }
}

/// A shared hold (permits, a read lock); dropping it ends the hold. A
/// guard declares it after the tokio guard, so the hold ends after the
/// permits went to (and woke) the next waiter.
#[derive(Debug)]
pub(crate) struct SharedHold<R: Borrow<Arc<Resource>>> {
    resource: R,
    place: SharedPlace,
}

impl<R: Borrow<Arc<Resource>>> SharedHold<R> {
    /// Records the current task as holding `permits`.
    #[inline]
    pub(crate) fn new(resource: R, at: &'static Location<'static>, permits: u32) -> Self {
        let place = resource.borrow().hold_shared(current_task(), at, permits);
        SharedHold { resource, place }
    }

    /// What the hold keeps of the resource (for an owned guard: its lock).
    pub(crate) fn kept(&self) -> &R {
        &self.resource
    }

    /// Changes the permits held.
    pub(crate) fn resize(&self, permits: u32) {
        self.resource.borrow().resize_shared(self.place, permits);
    }
}

impl<R: Borrow<Arc<Resource>>> Drop for SharedHold<R> {
    #[inline]
    fn drop(&mut self) {
        self.resource.borrow().release_shared(self.place);
    }
}
