//! Spawn metadata: a name, the spawn location and the spawning task.
//!
//! Any traced future becomes a task root on its own; wrapping it in
//! [`Spawned`] (or using `async_stack::tokio::spawn`, feature `tokio`) only
//! adds metadata. The wrapper hands its `SpawnInfo` to the first task root
//! polled inside it, through the thread's active state, so the root frame
//! stays the user's function and no extra frame appears in stacks.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Metadata a spawn helper attaches to the task it spawns.
#[derive(Debug, Clone)]
pub(crate) struct SpawnInfo {
    pub(crate) name: Option<Arc<String>>,
    pub(crate) location: &'static Location<'static>,
    pub(crate) parent: u64,
}

/// A future carrying spawn metadata for the task root inside it.
///
/// Created by [`spawned`] (any executor) or by the tokio helpers.
#[pin_project::pin_project]
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Spawned<F> {
    #[pin]
    inner: F,
    info: SpawnInfo,
}

/// Wraps `fut` so the task root it contains records this call's location,
/// the current task as its parent, and (with [`Spawned::named`]) a name.
///
/// Use it with executors other than tokio:
///
/// ```
/// use async_stack::{traced_async, task::spawned};
///
/// #[traced_async]
/// async fn worker() -> u32 { 7 }
///
/// let fut = spawned(worker()).named("worker-1");
/// assert_eq!(futures::executor::block_on(fut), 7);
/// ```
#[track_caller]
pub fn spawned<F: Future>(fut: F) -> Spawned<F> {
    Spawned {
        inner: fut,
        info: SpawnInfo {
            name: None,
            location: Location::caller(),
            parent: crate::record::current::current_task_id().unwrap_or(0),
        },
    }
}

impl<F> Spawned<F> {
    /// Sets the task's name, shown in dumps and panic reports.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.info.name = Some(Arc::new(name.into()));
        self
    }
}

impl<F: Future> Future for Spawned<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let info: &SpawnInfo = this.info;
        let active = crate::record::current::current();
        // Restores the previous pointer on every exit path, unwinding
        // included, so the thread never keeps a pointer into this future.
        let _restore = RestoreSpawn {
            active,
            prev: active.pending_spawn.replace(info),
        };
        this.inner.poll(cx)
    }
}

struct RestoreSpawn {
    active: &'static crate::record::current::Active,
    prev: *const SpawnInfo,
}

impl Drop for RestoreSpawn {
    #[inline]
    fn drop(&mut self) {
        self.active.pending_spawn.set(self.prev);
    }
}
