//! [`Traced`], the future wrapper that records an [`AsyncStackFrame`] on
//! every poll, and [`TracedExt`], which wraps any future in one.
//!
//! # Poll protocol
//!
//! `Traced::poll` is always inlined, and calls the inner future's `poll`
//! from exactly one place (a closure the walker recognises on the native
//! stack, inlined or not). On every poll it:
//!
//! 1. reads the thread's active frame; if there is none, this future is a
//!    **task root**, which takes two out-of-line, non-generic calls around
//!    the inner poll (registration on the first poll, see [`crate::task`],
//!    the task's state, its waker);
//! 2. otherwise links `parent` to it, and copies the return address cached
//!    in the parent's current await site;
//! 3. compares its entry (its cached `key` at its depth) with the task's
//!    published stack and rewrites it only if it differs, makes itself the
//!    active frame, polls the inner future, and restores the previous active
//!    frame and position. A guard restores them if the inner poll unwinds.
//!
//! Steady-state cost of a level: a handful of loads and plain stores. No
//! lock, no allocation, no atomic read-modify-write, no call. A task root
//! adds, once per task poll, two coarse clock reads and one
//! compare-and-swap on its state word, which wakers on other threads race
//! on (a plain store could lose a wake, or let a stale waker of a finished
//! task mark the slot's next task scheduled); each wake through the root's
//! waker adds a compare-and-swap and a count.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::active::{self, Active, Pos};
use crate::frame::AsyncStackFrame;
use crate::site::{self, CallSite};
use crate::sync::Ordering;
use crate::task::published::Entry;
use crate::task::registry::NewTask;
use crate::task::waker::RootShared;
use crate::task::{TaskSlot, registry};

/// A future wrapped so that each of its polls records an async stack frame.
///
/// Built by `#[traced_async]`, by [`TracedExt::traced`] and by
/// [`TracedExt::traced_named`]. It is `Send`/`Sync` exactly when the inner
/// future is.
#[pin_project::pin_project(PinnedDrop)]
#[must_use = "futures do nothing unless polled"]
pub struct Traced<F> {
    #[pin]
    inner: F,
    frame: AsyncStackFrame,
    /// Set while this future is a registered task root.
    root: Option<Arc<RootShared>>,
}

impl<F> std::fmt::Debug for Traced<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traced")
            .field("call_site", &self.frame.call_site())
            .field("task_id", &self.root.as_ref().map(|r| r.reg.id))
            .finish_non_exhaustive()
    }
}

impl<F> Traced<F> {
    /// Wraps `inner` with a static call-site record. Used by the
    /// `#[traced_async]` expansion.
    #[doc(hidden)]
    pub fn new(inner: F, call_site: &'static CallSite) -> Self {
        Traced {
            inner,
            frame: AsyncStackFrame::new(call_site),
            root: None,
        }
    }

    fn with_caller(
        inner: F,
        location: &'static Location<'static>,
        name: Option<&'static str>,
    ) -> Self {
        Traced {
            inner,
            frame: AsyncStackFrame::new(site::call_site_for_caller(location, name)),
            root: None,
        }
    }

    /// The frame this future records.
    pub fn frame(&self) -> &AsyncStackFrame {
        &self.frame
    }

    /// The task id, if this future is a registered task root.
    pub fn task_id(&self) -> Option<u64> {
        self.root.as_ref().map(|r| r.reg.id)
    }
}

/// Extension trait: `.traced()` and `.traced_named(..)` on any future.
///
/// ```
/// use async_stack::TracedExt;
///
/// let fut = async { 1 + 1 }.traced_named("adder");
/// assert_eq!(futures::executor::block_on(fut), 2);
/// ```
pub trait TracedExt: Future + Sized {
    /// Wraps the future so it records an async frame named after the
    /// caller's location.
    #[track_caller]
    fn traced(self) -> Traced<Self> {
        Traced::with_caller(self, Location::caller(), None)
    }

    /// Wraps the future so it records an async frame with this name.
    #[track_caller]
    fn traced_named(self, name: &'static str) -> Traced<Self> {
        Traced::with_caller(self, Location::caller(), Some(name))
    }
}

impl<F: Future> TracedExt for F {}

/// Restores the thread's active state if a poll unwinds.
///
/// The normal exit is written out in `Traced::poll`, which forgets this
/// guard, so the landing pad stays a few stores long and does not weigh on
/// whether the poll is inlined. For a child, the frame and its subtree are
/// gone from the thread's position; the published `pos` catches up at the
/// next entry or exit of a frame of this task, or at the end of its poll.
struct Unwind<'a> {
    active: &'a Active,
    parent: *const AsyncStackFrame,
    /// The parent's position, with the cursor at this frame's entry.
    restore: Pos,
    root: bool,
}

impl Drop for Unwind<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.root {
            unwind_root(self.active);
        } else {
            self.active.frame.set(self.parent);
            self.active.pos.set(self.restore.0);
        }
    }
}

/// What a child's poll entry saved, for its exit.
struct ChildEntry {
    prev: Pos,
    index: u32,
    task: *const TaskSlot,
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    /// Inlined into the parent's poll in optimised builds: a child level
    /// costs a few loads and stores and no call. A task root takes two
    /// out-of-line calls, `enter_root` and `exit_root`, which are not
    /// generic.
    ///
    /// The inner future's `poll` is called from exactly one place, so the
    /// compiler inlines a body into its `Traced` as it would inline it into
    /// a plain `.await`.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let frame: &AsyncStackFrame = this.frame;
        let inner = this.inner;
        let root = this.root;
        active::with_current(|a| {
            let parent = a.frame.get();
            let is_root = parent.is_null();
            let root_waker;
            let (waker, child) = if is_root {
                enter_root(frame, root, a, cx);
                match root.as_ref() {
                    Some(r) => {
                        root_waker = futures_util::task::waker_ref(r);
                        (&*root_waker, None)
                    }
                    None => (cx.waker(), None),
                }
            } else {
                (cx.waker(), Some(enter_child(frame, parent, a)))
            };
            // One `Context` for both cases, so that the inner poll below is
            // the only call to it. (`Context` is invariant in its lifetime:
            // the caller's cannot carry the root's waker.)
            let mut cx = Context::from_waker(waker);
            let unwind = Unwind {
                active: a,
                parent,
                restore: child
                    .as_ref()
                    .map_or(Pos::IDLE, |c| c.prev.with_cursor(c.index)),
                root: is_root,
            };
            let out = inner.poll(&mut cx);
            std::mem::forget(unwind);
            match child {
                Some(c) => exit_child(a, parent, c, out.is_pending()),
                None => exit_root(root, a, out.is_pending()),
            }
            out
        })
    }
}

/// A child's poll entry: links the parent, copies the return address,
/// publishes the frame's entry if it changed, and makes it the active frame.
#[inline(always)]
fn enter_child(frame: &AsyncStackFrame, parent: *const AsyncStackFrame, a: &Active) -> ChildEntry {
    frame
        .parent
        .store(parent as *mut AsyncStackFrame, Ordering::Relaxed);
    // SAFETY: `parent` is the thread's active frame, whose poll is on this
    // thread's stack below us (module invariant of `active`), so it is
    // alive; its await site is null or a `&'static AwaitSite`.
    let site = unsafe { (*parent).await_site.load(Ordering::Relaxed).as_ref() };
    let ra = site.map_or(0, |s| s.return_address.load(Ordering::Relaxed));
    frame.return_address.store(ra, Ordering::Relaxed);

    let prev = Pos(a.pos.get());
    let pos = prev.enter_child();
    let index = prev.cursor();
    let task = a.task.get();
    // SAFETY: `task` is null or the `&'static TaskSlot` of the task being
    // polled on this thread.
    if let Some(t) = unsafe { task.as_ref() } {
        let mut birth = frame.birth.load(Ordering::Relaxed);
        if birth == 0 {
            birth = t.next_birth();
            frame.birth.store(birth, Ordering::Relaxed);
        }
        let word = Entry::with_depth(frame.key.load(Ordering::Relaxed), pos.depth());
        t.stack.set_entry(index, word, birth);
        t.stack.set_pos(pos);
    }
    a.pos.set(pos.0);
    a.frame.set(frame);
    ChildEntry { prev, index, task }
}

/// A child's poll exit: the parent is active again; a pending frame keeps
/// its entry (and its pending children's), a completed one drops them.
#[inline(always)]
fn exit_child(a: &Active, parent: *const AsyncStackFrame, c: ChildEntry, pending: bool) {
    a.frame.set(parent);
    let cursor = if pending {
        Pos(a.pos.get()).cursor()
    } else {
        c.index
    };
    let back = c.prev.with_cursor(cursor);
    a.pos.set(back.0);
    // SAFETY: as in `enter_child`.
    if let Some(t) = unsafe { c.task.as_ref() } {
        t.stack.set_pos(back);
    }
}

/// A task root's poll entry: registers it on its first poll, marks it
/// running, publishes its entry and makes it the active frame of a task.
#[inline(never)]
fn enter_root(
    frame: &AsyncStackFrame,
    root: &mut Option<Arc<RootShared>>,
    a: &Active,
    cx: &Context<'_>,
) {
    frame.parent.store(std::ptr::null_mut(), Ordering::Relaxed);
    frame.return_address.store(0, Ordering::Relaxed);
    if root.is_none() {
        *root = register_root(frame.call_site(), a, cx);
    }
    // Registry full: an untracked root, still linking its children.
    let Some(r) = root.as_mut() else {
        a.frame.set(frame);
        return;
    };
    if !r.wakes_like(cx.waker()) {
        *r = RootShared::new(r.reg, cx.waker());
    }
    let reg = r.reg;
    let slot = reg.slot;
    slot.start_poll(reg.generation, crate::clock::now_ns());
    a.task.set(slot);
    a.task_id.set(reg.id);
    slot.stack.set_entry(
        0,
        Entry::with_depth(frame.key.load(Ordering::Relaxed), 0),
        0,
    );
    slot.stack.set_pos(Pos::ROOT);
    a.pos.set(Pos::ROOT.0);
    // Last: the unwinding guard that would reset it exists only once this
    // returns, so nothing above may leave it pointing at this frame.
    a.frame.set(frame);
}

/// A task root's poll exit: publishes the pending tree and marks the task
/// idle, or deregisters it if it completed.
#[inline(never)]
fn exit_root(root: &mut Option<Arc<RootShared>>, a: &Active, pending: bool) {
    leave_root(a);
    let Some(r) = root.as_ref() else { return };
    let reg = r.reg;
    if pending {
        reg.slot.end_poll(reg.generation, crate::clock::now_ns());
    } else {
        registry().deregister(&reg);
        *root = None;
    }
}

/// Leaves a task root's poll that unwound (see [`leave_root`]).
#[cold]
#[inline(never)]
fn unwind_root(a: &Active) {
    leave_root(a);
}

/// Leaves a task root's poll, by return or by unwinding: publishes the
/// length of the pending tree and clears the thread's state.
#[inline(always)]
fn leave_root(a: &Active) {
    // SAFETY: `task` is null or the `&'static TaskSlot` of the task being
    // polled on this thread (see `active`).
    if let Some(task) = unsafe { a.task.get().as_ref() } {
        task.stack.finish(Pos(a.pos.get()).cursor());
    }
    a.frame.set(std::ptr::null());
    a.task.set(std::ptr::null());
    a.task_id.set(0);
    a.pos.set(Pos::IDLE.0);
}

#[cold]
#[inline(never)]
fn register_root(
    call_site: &'static CallSite,
    a: &Active,
    cx: &Context<'_>,
) -> Option<Arc<RootShared>> {
    // SAFETY: `pending_spawn` is null or points into a `Spawned` future whose
    // poll is on this thread's stack (it restores the pointer on exit).
    let spawn = unsafe { a.pending_spawn.get().as_ref() };
    let reg = registry().register(NewTask {
        parent: spawn.map_or(0, |s| s.parent),
        location: spawn.map(|s| s.location),
        root_call_site: call_site.id(),
        name: spawn.and_then(|s| s.name.as_ref()),
        now_ns: crate::clock::now_ns(),
    })?;
    // The spawn metadata belongs to this root only.
    a.pending_spawn.set(std::ptr::null());
    Some(RootShared::new(reg, cx.waker()))
}

#[pin_project::pinned_drop]
impl<F> PinnedDrop for Traced<F> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        if let Some(root) = this.root.take() {
            registry().deregister(&root.reg);
        }
    }
}
