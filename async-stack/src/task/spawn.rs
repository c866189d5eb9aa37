//! Spawn metadata: a name, the spawn location and the spawning task.
//!
//! Any traced future becomes a task root on its own; wrapping it in
//! [`Spawned`] (or using `async_stack::tokio::spawn`, feature `tokio`) only
//! adds metadata. While it polls its inner future, the wrapper leaves its
//! metadata in this module's thread-local slot, and the first task root
//! that registers inside that poll takes it (see `task/root.rs`),
//! so the root frame stays the user's function and no extra frame appears
//! in stacks. The thread's current-frame state knows nothing of this.

use std::cell::Cell;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::task::record::TaskName;

/// Metadata a spawn helper attaches to the task it spawns.
#[derive(Debug)]
pub(crate) struct SpawnInfo {
    pub(crate) name: Option<Arc<TaskName>>,
    pub(crate) location: &'static Location<'static>,
    pub(crate) parent: u64,
}

thread_local! {
    /// The metadata of the `Spawned` future being polled on this thread,
    /// for the task root it contains (null: none).
    static PENDING: Cell<*const SpawnInfo> = const { Cell::new(std::ptr::null()) };
}

/// Takes the spawn metadata waiting on this thread, if any: the root that
/// registers now is the one the spawn helper wraps. Read in place, not
/// copied: see [`Pending`].
pub(crate) fn take_pending() -> Pending {
    Pending(
        PENDING
            .try_with(|p| p.replace(std::ptr::null()))
            .unwrap_or(std::ptr::null()),
    )
}

/// The spawn metadata a registering root took ([`take_pending`]): a
/// pointer into the `Spawned` future whose poll is running further down
/// this thread's stack, so it is only read during that poll, by the
/// registration that took it. Neither `Send` nor `Clone`: it stays in the
/// registration's frame.
pub(crate) struct Pending(*const SpawnInfo);

impl Pending {
    /// The metadata, if a spawn helper left some.
    #[inline]
    pub(crate) fn get(&self) -> Option<&SpawnInfo> {
        // SAFETY: `PENDING` held null or a pointer into a `Spawned` future
        // whose poll is on this thread's stack below the registration that
        // took it (the poll restores the pointer on every exit path), and
        // that poll does not touch `info` again until the inner poll
        // returns. The registration, which owns `self`, runs inside that
        // inner poll and drops `self` before returning, so the future is
        // alive and unchanged while the borrow lasts.
        unsafe { self.0.as_ref() }
    }
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
    /// The metadata, until a task root inside takes it; `None` after: later
    /// roots inside are not this spawn's. (No flag of its own: every task
    /// spawned through a helper carries this, so its size counts in the
    /// memory per live task.)
    info: Option<SpawnInfo>,
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
        info: Some(SpawnInfo {
            name: None,
            location: Location::caller(),
            parent: crate::task::record::layout::current_task_id().unwrap_or(0),
        }),
    }
}

impl<F> Spawned<F> {
    /// Sets the task's name, shown in dumps and panic reports.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        if let Some(info) = &mut self.info {
            info.name = Some(Arc::new(TaskName::new(name.into())));
        }
        self
    }
}

impl<F: Future> Future for Spawned<F> {
    type Output = F::Output;

    // Always inlined into the executor's poll: left to itself, the
    // compiler inlined the traced root into this function instead, and
    // every poll of a spawned task paid one more call.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Some(info) = this.info.as_ref() else {
            return this.inner.poll(cx);
        };
        let info: *const SpawnInfo = info;
        // Restores the previous pointer on every exit path, unwinding
        // included, so the thread never keeps a pointer into this future.
        let restore = PENDING
            .try_with(|p| RestoreSpawn {
                prev: p.replace(info),
            })
            .ok();
        let out = this.inner.poll(cx);
        // Taken: the root's registration is over (it ran inside the inner
        // poll), so nothing points into `info` any more.
        if restore.is_some() && PENDING.try_with(|p| p.get() != info).unwrap_or(true) {
            *this.info = None;
        }
        out
    }
}

struct RestoreSpawn {
    prev: *const SpawnInfo,
}

impl Drop for RestoreSpawn {
    #[inline]
    fn drop(&mut self) {
        let _ = PENDING.try_with(|p| p.set(self.prev));
    }
}
