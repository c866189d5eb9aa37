//! Spawn metadata: a name, the spawn location and the spawning task.
//!
//! Any traced future becomes a task root on its own; wrapping it in
//! [`Spawned`] (or using `async_stack::tokio::spawn`, feature `tokio`) only
//! adds metadata. While it polls its inner future, the wrapper offers its
//! metadata in a thread-local slot (`task/spawn_info.rs`), and every task
//! root that registers inside one of its polls takes it (see
//! `task/root.rs`): the task keeps its name, spawn site and parent while
//! any of its roots lives (a handler called in a loop, one root after the
//! other; a `join!` whose first branch ends first). The root frame stays
//! the user's function and no extra frame appears in stacks. The
//! thread's current-frame state knows nothing of this.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::task::record::TaskName;
use crate::task::spawn_info::{self, SpawnInfo};

/// A future carrying spawn metadata for the task roots inside it: every
/// traced root first polled inside it records its name, spawn site and
/// parent.
///
/// Created by [`spawned`] (any executor) or by the tokio helpers. The
/// tokio helpers also register the task as they spawn it, so that dumps
/// show it before its first poll: the first root that registers inside
/// takes that task over, and one that none takes over in the first poll
/// ends there (later roots register as usual), or when the future is
/// dropped unpolled.
#[pin_project::pin_project(PinnedDrop)]
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Spawned<F> {
    #[pin]
    inner: F,
    /// The metadata, for every task root inside. (No flag of its own:
    /// every task spawned through a helper carries this, so its size
    /// counts in the memory per live task.) Never `None`: an `Option` for
    /// the layout, whose niche tokio's task stage would take otherwise,
    /// which made its moves of the stage dearer.
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
        info: Some(SpawnInfo::new(
            Location::caller(),
            crate::task::record::layout::current_task_id().unwrap_or(0),
        )),
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

    /// [`preregister`](Self::preregister), by value (for tests).
    #[cfg(all(test, not(async_stack_loom)))]
    pub(crate) fn preregistered(mut self) -> Self {
        self.preregister();
        self
    }

    /// Registers the task now, before any executor has it (see the type's
    /// docs). Call it last, once the name is set: the tokio helpers do,
    /// in place (a large future is not moved once more), just before they
    /// hand the future to `tokio::spawn`.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn preregister(&mut self) {
        if let Some(info) = &mut self.info {
            let pre = crate::task::root::preregister(info);
            info.registered(pre);
        }
    }
}

#[pin_project::pinned_drop]
impl<F> PinnedDrop for Spawned<F> {
    fn drop(self: Pin<&mut Self>) {
        // The task registered at spawn ends if it was never polled. After
        // a poll that no root took it over in, it has ended already (`pre`
        // is 0); one that a root took over in a poll that unwound is the
        // root's to end (`end_unadopted` leaves it).
        let pre = self.project().info.as_ref().map_or(0, SpawnInfo::pre);
        if pre != 0 {
            crate::task::root::end_unadopted(pre);
        }
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
        let pre = info.pre();
        if pre != 0 {
            // Nothing left by a poll that unwound before reading it.
            spawn_info::take_adopted_parent();
        }
        let info: *const SpawnInfo = info;
        // Offered on every poll: each root that registers in it is one of
        // this task's, and carries its name, spawn site and parent.
        // Withdrawn on every exit path, unwinding included, so the thread
        // never keeps a pointer into this future.
        let offer = spawn_info::offer(info);
        let out = this.inner.poll(cx);
        // The roots' registrations are over (they ran inside the inner
        // poll), so nothing points into `info` any more.
        if pre != 0
            && let Some(info) = this.info.as_mut()
        {
            // The first poll: a root took the task registered at spawn
            // over, or none did and it ends here (a later root registers
            // as a task of its own). Either way later roots take the
            // parent from the metadata itself.
            let parent = if offer.taken() {
                spawn_info::take_adopted_parent()
            } else {
                crate::task::root::end_unadopted(pre)
            };
            info.unregistered(parent);
        }
        out
    }
}
