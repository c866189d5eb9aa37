//! [`Traced`], the future wrapper that records an [`AsyncStackFrame`] on
//! every poll, and [`TracedExt`], which wraps any future in one.
//!
//! # Poll protocol
//!
//! `Traced::poll` is `#[inline(never)]`, so it is one physical native frame
//! the walker can find. On every poll it:
//!
//! 1. reads the thread's active frame; if there is none, this future is a
//!    **task root** (registered on its first poll, see [`crate::task`]);
//! 2. otherwise links `parent` to it, and copies the return address cached
//!    in the parent's current await site (resolving it on first use);
//! 3. publishes its entry in the task's published stack, makes itself the
//!    active frame, polls the inner future, and restores the previous active
//!    frame through a drop guard, so unwinding restores it too.
//!
//! Steady-state cost: a handful of loads and plain stores. No lock, no
//! allocation, no atomic read-modify-write.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::active::{self, Active};
use crate::frame::AsyncStackFrame;
use crate::site::{self, AwaitSite, CallSite};
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

#[inline(always)]
fn await_id(frame: &AsyncStackFrame) -> u32 {
    frame.await_site().map_or(0, AwaitSite::id)
}

/// Restores the thread's active state when a poll ends, by return or by
/// unwinding.
struct Scope<'a> {
    active: &'a Active,
    prev_frame: *const AsyncStackFrame,
    prev_depth: u32,
    prev_index: u32,
    index: u32,
    task: *const TaskSlot,
    /// Set when the frame returned `Pending` and its entry must stay.
    keep: bool,
    /// This scope is a task root's: leaving it leaves the task.
    root: bool,
}

impl Drop for Scope<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.keep {
            // Completed or unwound: the frame and its subtree are gone.
            self.active.cursor.set(self.index);
        }
        self.active.frame.set(self.prev_frame);
        self.active.depth.set(self.prev_depth);
        self.active.index.set(self.prev_index);
        // SAFETY: `task` is null or the `&'static TaskSlot` of the task
        // being polled on this thread (see `active`).
        if let Some(task) = unsafe { self.task.as_ref() } {
            let cursor = self.active.cursor.get();
            if self.root {
                task.stack.finish(cursor);
            } else {
                task.stack.set_pos(self.prev_index, cursor);
            }
        }
        if self.root {
            self.active.task.set(std::ptr::null());
            self.active.task_id.set(0);
            self.active.cursor.set(0);
        }
    }
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    #[inline(never)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();

        let frame: &AsyncStackFrame = this.frame;
        let call_site = frame.call_site();

        let polled = active::with(|a| {
            let parent = a.frame.get();
            if parent.is_null() {
                poll_root(this.inner.as_mut(), frame, this.root, call_site, a, cx)
            } else {
                poll_child(this.inner.as_mut(), frame, parent, call_site, a, cx)
            }
        });
        match polled {
            Some(p) => p,
            // Thread-locals are being torn down: poll untraced.
            None => this.inner.poll(cx),
        }
    }
}

#[inline(always)]
fn poll_child<F: Future>(
    inner: Pin<&mut F>,
    frame: &AsyncStackFrame,
    parent: *const AsyncStackFrame,
    call_site: &'static CallSite,
    a: &Active,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    // SAFETY: `parent` is the thread's active frame, whose poll is on this
    // thread's stack below us (module invariant of `active`), so it is alive.
    let parent_ref = unsafe { &*parent };
    frame
        .parent
        .store(parent as *mut AsyncStackFrame, Ordering::Relaxed);
    let ra = match parent_ref.await_site() {
        Some(site) => match site.return_address.load(Ordering::Relaxed) {
            0 => resolve_return_address(site, parent_ref),
            ra => ra,
        },
        None => 0,
    };
    frame.return_address.store(ra, Ordering::Relaxed);

    let task = a.task.get();
    let index = a.cursor.get();
    let prev_index = a.index.get();
    let prev_depth = a.depth.get();
    let depth = prev_depth + 1;
    let call_id = call_site.id();
    // SAFETY: `task` is null or the `&'static TaskSlot` of the task being
    // polled on this thread.
    let task_ref = unsafe { task.as_ref() };
    let mut birth = frame.birth.load(Ordering::Relaxed);
    if let Some(t) = task_ref {
        if birth == 0 {
            birth = t.next_birth();
            frame.birth.store(birth, Ordering::Relaxed);
        }
        t.stack
            .set_entry(index, Entry::encode(depth, call_id, await_id(frame)), birth);
        t.stack.set_pos(index, index.wrapping_add(1));
    }
    a.cursor.set(index.wrapping_add(1));
    a.index.set(index);
    a.depth.set(depth);
    a.frame.set(frame);
    let mut scope = Scope {
        active: a,
        prev_frame: parent,
        prev_depth,
        prev_index,
        index,
        task,
        keep: false,
        root: false,
    };
    let out = call_body(inner, frame, cx);
    // Pending: the entry is already current (an `.await` reached during the
    // poll published itself, see `active::set_await_site`).
    scope.keep = out.is_pending();
    drop(scope);
    out
}

#[inline(always)]
fn poll_root<F: Future>(
    inner: Pin<&mut F>,
    frame: &AsyncStackFrame,
    root: &mut Option<Arc<RootShared>>,
    call_site: &'static CallSite,
    a: &Active,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    frame.parent.store(std::ptr::null_mut(), Ordering::Relaxed);
    frame.return_address.store(0, Ordering::Relaxed);
    let call_id = call_site.id();
    if root.is_none() {
        *root = register_root(call_site, call_id, a, cx);
    }
    let Some(r) = root.as_mut() else {
        // Registry full: run as an untracked root, still linking children.
        a.frame.set(frame);
        let _scope = Scope {
            active: a,
            prev_frame: std::ptr::null(),
            prev_depth: 0,
            prev_index: 0,
            index: 0,
            task: std::ptr::null(),
            keep: true,
            root: true,
        };
        return call_body(inner, frame, cx);
    };
    if !r.wakes_like(cx.waker()) {
        *r = RootShared::new(r.reg, cx.waker());
    }
    let reg = r.reg;
    let slot = reg.slot;
    slot.start_poll(reg.generation, crate::clock::now_ns());
    let waker = futures_util::task::waker_ref(r);
    let mut cx = Context::from_waker(&waker);

    a.task.set(slot);
    a.task_id.set(reg.id);
    a.depth.set(0);
    a.index.set(0);
    slot.stack
        .set_entry(0, Entry::encode(0, call_id, await_id(frame)), 0);
    slot.stack.set_pos(0, 1);
    a.cursor.set(1);
    a.frame.set(frame);
    let mut scope = Scope {
        active: a,
        prev_frame: std::ptr::null(),
        prev_depth: 0,
        prev_index: 0,
        index: 0,
        task: slot,
        keep: false,
        root: true,
    };
    let out = call_body(inner, frame, &mut cx);
    scope.keep = out.is_pending();
    drop(scope);
    if out.is_pending() {
        slot.end_poll(reg.generation, crate::clock::now_ns());
    } else {
        registry().deregister(&reg);
        *root = None;
    }
    out
}

/// Polls an instrumented body from a physical frame of its own.
///
/// This never-inlined frame holds the frame's *poll marker*. The body's
/// resume function is either the very next physical frame, or inlined into
/// this one; `body_fn` lets readers tell which (see
/// [`resolve_return_address`] and the walker). Either way the body's code is
/// the innermost user code at or inside the marker frame, which is what the
/// walker and a child's return address rely on.
#[inline(never)]
fn call_body<F: Future>(
    inner: Pin<&mut F>,
    frame: &AsyncStackFrame,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    // An address inside this physical frame. A native frame's stack pointer
    // is at or below it for this frame and everything it calls, and above
    // it for every caller.
    let marker = 0u8;
    let marker_addr = std::hint::black_box(&marker) as *const u8 as usize;
    frame.poll_marker.store(marker_addr, Ordering::Relaxed);
    let poll: fn(Pin<&mut F>, &mut Context<'_>) -> Poll<F::Output> = <F as Future>::poll;
    frame
        .body_fn
        .store(poll as *const () as usize, Ordering::Relaxed);
    inner.poll(cx)
}

#[cold]
#[inline(never)]
fn register_root(
    call_site: &'static CallSite,
    call_id: u32,
    a: &Active,
    cx: &Context<'_>,
) -> Option<Arc<RootShared>> {
    // SAFETY: `pending_spawn` is null or points into a `Spawned` future whose
    // poll is on this thread's stack (it restores the pointer on exit).
    let spawn = unsafe { a.pending_spawn.get().as_ref() };
    let reg = registry().register(NewTask {
        parent: spawn.map_or(0, |s| s.parent),
        location: spawn.map(|s| s.location),
        root_call_site: call_id,
        name: spawn.and_then(|s| s.name.as_ref()),
        static_name: call_site.explicit_name().then(|| call_site.name()),
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

/// Resolves, once per `.await` site, the address in the awaiting parent's
/// code that leads to this child's poll, and caches it in the site.
///
/// The parent's `call_body` is the outermost physical frame whose stack
/// pointer is at or below the parent's poll marker. If the frame just
/// inside it starts at the parent's body function (`body_fn`), the body has
/// its own frame, whose return address is inside the `.await` that polls
/// us. Otherwise the body was inlined into `call_body`, and `call_body`'s
/// own return address is inside that `.await`.
#[cold]
#[inline(never)]
fn resolve_return_address(site: &'static AwaitSite, parent: &AsyncStackFrame) -> usize {
    let parent_marker = parent.poll_marker.load(Ordering::Relaxed);
    let body_fn = parent.body_fn.load(Ordering::Relaxed);
    // (ip, function start) of the last two frames at or below the marker.
    let mut inside = (0usize, 0usize);
    let mut marker_frame = (0usize, 0usize);
    backtrace::trace(|f| {
        let sp = f.sp() as usize;
        if sp != 0 && sp > parent_marker {
            return false;
        }
        inside = marker_frame;
        marker_frame = (f.ip() as usize, f.symbol_address() as usize);
        true
    });
    let ra = if inside.1 != 0 && inside.1 == body_fn {
        inside.0
    } else {
        marker_frame.0
    };
    let ra = if ra == 0 { 1 } else { ra };
    site.return_address.store(ra, Ordering::Relaxed);
    ra
}
