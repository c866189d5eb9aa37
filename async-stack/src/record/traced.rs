//! [`Traced`], the future wrapper that records an [`AsyncStackFrame`] on
//! every poll, and [`TracedExt`], which wraps any future in one.
//!
//! # Poll protocol
//!
//! `Traced::poll` is always inlined, and calls the inner future's `poll`
//! from exactly one place, so that exactly one `Traced::poll` (inlined or
//! not) stands on the native stack per level: the walker's anchor. On every
//! poll it:
//!
//! 1. reads the thread's current frame (see [`crate::record::current`]); if there is
//!    none, this future is a **task root**: around the inner poll it marks
//!    the task running, then idle or scheduled, and hands down the task's
//!    own waker (see [`crate::task`]). Registration on the first poll, an
//!    untracked root, a new executor waker and completion are cold calls;
//! 2. otherwise stores `parent`, and compares the parent's `link` with the
//!    one it saw when it was linked (see [`crate::record::frame`], "Links"). If they
//!    differ (its first poll, a new parent, another task), a cold call gives
//!    it a slot in the task's published stack and copies the return address
//!    cached in the parent's current await site;
//! 3. makes itself the current frame, polls the inner future, and makes the
//!    parent current again; a guard does the same if the inner poll
//!    unwinds. During a task's poll the current frame is a word of the
//!    task's published stack, so readers of the task see which frame runs
//!    at no further cost. A frame that completes gives its slot back
//!    (cold).
//!
//! Steady-state cost of a level: four loads and three plain stores (two
//! of them the current frame's), one compare. No lock, no allocation, no
//! atomic read-modify-write, no call. A task root adds, once per task poll,
//! a few plain stores to its task slot (state and time, poll count, the
//! wake count it has seen) and two reads of the ticking clock
//! ([`crate::record::clock`]); a wake from another thread through the root's waker
//! adds a compare-and-swap on the task's wake counter, and a wake from
//! inside the task's own poll only a thread-local count.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::record::current::{self, Active};
use crate::record::frame::{AsyncStackFrame, link};
use crate::record::site::{self, CallSite};
use crate::sync::{AtomicPtr, Ordering};
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
/// whether the poll is inlined. A child keeps its place in the task until
/// it is dropped.
struct Unwind<'a> {
    active: &'a Active,
    /// For a child: the current-frame word and the parent to restore in it.
    child: Option<(&'a AtomicPtr<AsyncStackFrame>, *const AsyncStackFrame)>,
}

impl Drop for Unwind<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        match self.child {
            None => unwind_root(self.active),
            Some((cur, parent)) => cur.store(parent.cast_mut(), Ordering::Relaxed),
        }
    }
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    /// Inlined into the parent's poll in optimised builds: a child level
    /// costs a few loads and stores and no call. A task root's entry and
    /// exit are inlined too (the executor calls the root's poll, so the
    /// root path is not on any child's), with cold calls for its rare
    /// cases.
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
        let a = current::current();
        // A child passes the caller's `Context` through; a task root polls
        // with its own waker. One `&mut Context` for both, so that the
        // inner poll below is the only call to it.
        let root_waker;
        let mut root_cx;
        let (cx, child): (&mut Context<'_>, _) = match a.cur_word() {
            Some(cur) => {
                let parent = cur.load(Ordering::Relaxed);
                enter_child(frame, parent, a);
                cur.store(std::ptr::from_ref(frame).cast_mut(), Ordering::Relaxed);
                (cx, Some((cur, parent.cast_const())))
            }
            None => {
                enter_root(frame, root, a, cx);
                match root.as_ref() {
                    Some(r) => {
                        root_waker = r.waker_ref();
                        root_cx = Context::from_waker(&root_waker);
                        // SAFETY: only the lifetime parameter changes, to the
                        // caller's (`Context` is invariant in it). The result is
                        // used for the single `inner.poll` call below, while
                        // `root_waker` is alive. `Future::poll` is generic over
                        // its `Context`'s lifetime, so the callee cannot keep
                        // the borrowed waker past the call (it can only clone
                        // it), whatever lifetimes its own type carries.
                        let root_cx = unsafe { &mut *(&raw mut root_cx).cast::<Context<'_>>() };
                        (root_cx, None)
                    }
                    None => (cx, None),
                }
            }
        };
        let unwind = Unwind { active: a, child };
        let out = inner.poll(cx);
        std::mem::forget(unwind);
        match child {
            Some((cur, parent)) => {
                cur.store(parent.cast_mut(), Ordering::Relaxed);
                if out.is_ready() {
                    unlink(frame, Some(a));
                }
            }
            None => exit_root(frame, root, a, out.is_pending()),
        }
        out
    }
}

/// A child's poll entry: stores the parent, and takes a new place in the
/// task if the parent's changed (cold). The caller then makes the frame
/// the current one.
#[inline(always)]
fn enter_child(frame: &AsyncStackFrame, parent: *mut AsyncStackFrame, a: &Active) {
    // SAFETY: `parent` is the thread's current frame, non-null while a task
    // root's poll runs, and its poll is on this thread's stack below us
    // (invariant of `active`), so it is alive.
    let p = unsafe { &*parent };
    frame.parent.store(parent, Ordering::Relaxed);
    let parent_link = p.link.load(Ordering::Relaxed);
    if frame.parent_link.load(Ordering::Relaxed) != parent_link {
        relink(frame, p, parent_link, a);
    }
}

/// Gives `frame` a place under the parent whose link is `parent_link`, in
/// the task polled on this thread (none if that task is untracked).
///
/// Within the same task the frame keeps its slot and only its parent
/// changes; otherwise it gives back its old place and takes a new one. A
/// frame under a parent that holds no slot (its task's stack was full)
/// holds none either, so that trees are cut below, never in the middle.
#[cold]
#[inline(never)]
fn relink(frame: &AsyncStackFrame, parent: &AsyncStackFrame, parent_link: u64, a: &Active) {
    frame
        .return_address
        .store(parent.await_return_address(), Ordering::Relaxed);
    // SAFETY: as in `enter_child`.
    match unsafe { a.task.get().as_ref() } {
        None => unlink(frame, Some(a)),
        Some(t) => {
            let task_id = t.id.load(Ordering::Relaxed);
            let old = frame.link.load(Ordering::Relaxed);
            let parent_slot = link::slot(parent_link);
            if old != 0
                && link::in_task(old, task_id)
                && std::ptr::eq(frame.task.load(Ordering::Relaxed), t)
            {
                if let Some(slot) = link::slot(old) {
                    let key = frame.key.load(Ordering::Relaxed);
                    t.stack.set_word(slot, Entry::published(key, parent_slot));
                }
            } else {
                unlink(frame, Some(a));
                take_place(frame, t, task_id, parent_slot, parent_slot.is_none());
            }
        }
    }
    // Last: `unlink` clears it.
    frame.parent_link.store(parent_link, Ordering::Relaxed);
}

/// Gives `frame` a new place in task `t` (id `task_id`) with a new birth:
/// a slot under the frame in slot `parent` (`None`: at the top, as the
/// root), or, when `hidden`, no slot, only a count in the task's overflow.
fn take_place(
    frame: &AsyncStackFrame,
    t: &'static TaskSlot,
    task_id: u64,
    parent: Option<u32>,
    hidden: bool,
) {
    let birth = t.next_birth();
    let slot = if hidden {
        t.stack.hide();
        None
    } else {
        let key = frame.key.load(Ordering::Relaxed);
        t.stack.take(
            Entry::published(key, parent),
            birth,
            std::ptr::from_ref(frame) as usize,
        )
    };
    frame
        .task
        .store(t as *const TaskSlot as *mut TaskSlot, Ordering::Relaxed);
    frame
        .link
        .store(link::new(task_id, birth, slot), Ordering::Relaxed);
}

/// Gives back `frame`'s place in its task, if it holds one: directly when
/// this thread is polling that task (`a`), otherwise by retiring it for
/// the task's next poll (a drop on another thread, or outside the task).
#[cold]
#[inline(never)]
fn unlink(frame: &AsyncStackFrame, a: Option<&Active>) {
    let old = frame.link.load(Ordering::Relaxed);
    if old == 0 {
        return;
    }
    frame.link.store(0, Ordering::Relaxed);
    frame.parent_link.store(0, Ordering::Relaxed);
    // SAFETY: `task` is null or a `&'static TaskSlot` (slots are never
    // freed), stored by `relink` or `register_root`.
    let Some(t) = (unsafe { frame.task.load(Ordering::Relaxed).cast_const().as_ref() }) else {
        return;
    };
    // The slot now holds another task: the place went with the old one.
    if !link::in_task(old, t.id.load(Ordering::Relaxed)) {
        return;
    }
    if a.is_some_and(|a| std::ptr::eq(a.task.get(), t)) {
        t.stack.give_back(link::slot(old));
    } else if let Some(slot) = link::slot(old) {
        t.stack.retire(slot, link::birth(old));
    }
}

/// A task root's poll entry: registers it on its first poll, marks it
/// running and makes it the current frame, in its task's `polled` word.
#[inline(always)]
fn enter_root(
    frame: &AsyncStackFrame,
    root: &mut Option<Arc<RootShared>>,
    a: &Active,
    cx: &Context<'_>,
) {
    frame.parent.store(std::ptr::null_mut(), Ordering::Relaxed);
    frame.return_address.store(0, Ordering::Relaxed);
    match root.as_deref() {
        Some(r) if r.wakes_like(cx.waker()) => begin_task_poll(frame, r, a),
        _ => enter_root_slow(frame, root, a, cx),
    }
}

/// [`enter_root`] on a first poll, with an untracked root, or with a new
/// executor waker.
#[cold]
#[inline(never)]
fn enter_root_slow(
    frame: &AsyncStackFrame,
    root: &mut Option<Arc<RootShared>>,
    a: &Active,
    cx: &Context<'_>,
) {
    if root.is_none() {
        *root = register_root(frame, a, cx);
    }
    // Registry full: an untracked root, still linking its children.
    let Some(r) = root.as_mut() else {
        a.own
            .store(std::ptr::from_ref(frame).cast_mut(), Ordering::Relaxed);
        a.cur.set(&a.own);
        return;
    };
    if !r.wakes_like(cx.waker()) {
        *r = RootShared::new(r.reg, cx.waker());
    }
    begin_task_poll(frame, r, a);
}

/// The task of root `r` starts a poll on this thread, with `frame` current.
#[inline(always)]
fn begin_task_poll(frame: &AsyncStackFrame, r: &RootShared, a: &Active) {
    let reg = &r.reg;
    let slot = reg.slot;
    slot.stack.collect_retired();
    slot.start_poll(reg.generation, crate::record::clock::now_ms());
    a.task.set(slot);
    slot.stack
        .polled
        .store(std::ptr::from_ref(frame).cast_mut(), Ordering::Relaxed);
    // Last: the unwinding guard that would reset it exists only once this
    // returns, so nothing above may leave it set.
    a.cur.set(&slot.stack.polled);
}

/// A task root's poll exit: marks the task idle, or deregisters it if it
/// completed.
#[inline(always)]
fn exit_root(
    frame: &AsyncStackFrame,
    root: &mut Option<Arc<RootShared>>,
    a: &Active,
    pending: bool,
) {
    let self_wakes = a.self_wakes.get();
    leave_root(a);
    match root.as_ref() {
        Some(r) if pending => {
            let reg = &r.reg;
            reg.slot
                .end_poll(reg.generation, crate::record::clock::now_ms(), self_wakes);
        }
        _ => end_task(frame, root),
    }
}

/// Ends the task this future is the root of, if it is one: the task leaves
/// the registry, and the frame forgets its place there.
#[cold]
#[inline(never)]
fn end_task(frame: &AsyncStackFrame, root: &mut Option<Arc<RootShared>>) {
    if let Some(r) = root.take() {
        registry().deregister(&r.reg);
        frame.link.store(0, Ordering::Relaxed);
    }
}

/// Leaves a task root's poll that unwound (see [`leave_root`]).
#[cold]
#[inline(never)]
fn unwind_root(a: &Active) {
    leave_root(a);
}

/// Leaves a task root's poll, by return or by unwinding: no frame of the
/// task is polled any more, and the thread's state is cleared.
#[inline(always)]
fn leave_root(a: &Active) {
    if let Some(cur) = a.cur_word() {
        cur.store(std::ptr::null_mut(), Ordering::Relaxed);
    }
    a.cur.set(std::ptr::null());
    a.task.set(std::ptr::null());
    a.self_wakes.set(0);
}

/// Registers a task root on its first poll, and gives its frame the first
/// slot of the task's published stack.
#[cold]
#[inline(never)]
fn register_root(frame: &AsyncStackFrame, a: &Active, cx: &Context<'_>) -> Option<Arc<RootShared>> {
    // A frame polled as a child before keeps no place there.
    unlink(frame, Some(a));
    // SAFETY: `pending_spawn` is null or points into a `Spawned` future whose
    // poll is on this thread's stack (it restores the pointer on exit).
    let spawn = unsafe { a.pending_spawn.get().as_ref() };
    let reg = registry().register(NewTask {
        parent: spawn.map_or(0, |s| s.parent),
        location: spawn.map(|s| s.location),
        root_call_site: frame.call_site().id(),
        name: spawn.and_then(|s| s.name.as_ref()),
        now_ms: crate::record::clock::now_ms(),
    })?;
    // The spawn metadata belongs to this root only.
    a.pending_spawn.set(std::ptr::null());
    take_place(frame, reg.slot, reg.id, None, false);
    Some(RootShared::new(reg, cx.waker()))
}

#[pin_project::pinned_drop]
impl<F> PinnedDrop for Traced<F> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        let frame: &AsyncStackFrame = this.frame;
        if this.root.is_some() {
            end_task(frame, this.root);
        } else if frame.link.load(Ordering::Relaxed) != 0
            && current::with(|a| unlink(frame, Some(a))).is_none()
        {
            unlink(frame, None);
        }
    }
}
