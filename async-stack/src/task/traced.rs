//! [`Traced`], the future wrapper that records an [`AsyncStackFrame`] on
//! every poll, [`TracedExt`], which wraps any future in one, and the
//! `.await` recording that `#[traced_async]` bodies call.
//!
//! # Poll protocol
//!
//! `Traced::poll` is always inlined, and calls the inner future's `poll`
//! from exactly one place, so that exactly one `Traced::poll` (inlined or
//! not) stands on the native stack per level: the walker's anchor. On every
//! poll it reads the thread's current-frame word (see
//! [`crate::record::current`]), then:
//!
//! - **no current frame**: this future is a **task root**; around the inner
//!   poll it enters and leaves its task (see [`crate::task::root`]: the
//!   first poll registers it, every poll marks it running and lends the
//!   task's waker);
//! - **otherwise** it is a child: it stores its parent (the current frame),
//!   and checks with one compare that its place (see
//!   [`crate::task::place`]) still holds: same task, parent in the same
//!   slot. If not (its first poll, a new parent slot, another task), a cold
//!   call moves it.
//!
//! Then it makes itself the current frame (its slot in the word's tag),
//! polls the inner future, and makes the parent current again; a guard does
//! the same if the inner poll unwinds. During a task's poll the current
//! frame is the record's `current` word, so readers of the task see which
//! frame runs at no further cost. A child that completes gives its place
//! back (cold).
//!
//! Steady-state cost of a level: four loads (the thread's word, the
//! current frame, the place, the task's key), three plain stores (the
//! parent, and the current frame twice), one compare: some fifteen
//! instructions, since the place keeps the parent's slot where the
//! current-frame word does (see [`crate::task::place`]). No lock, no
//! allocation, no atomic read-modify-write, no call. A task root adds,
//! once per task poll, the lookup of its record in the registry's page
//! table, a check that the executor's waker is the one the record holds,
//! a few plain stores to its record (state and time, poll count, current
//! frame) and two reads of the ticking clock ([`crate::clock`]);
//! `benches/benches/root_poll.rs` measures that per poll. A wake
//! from another thread through the task's waker adds a compare-and-swap on
//! the record's wake count, and a wake from inside the task's own poll
//! only a thread-local count.
//!
//! # `.await` recording
//!
//! The `#[traced_async]` expansion calls [`set_await_site`] just before
//! each `.await` of the body (once per `.await` reached, not per poll: a
//! resumed body continues inside it) and [`clear_await_site`] just after.
//! The frame's site word then says which `.await` it is at, and its slot
//! in the published stack is updated only when that changes.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::record::current::NO_SLOT;
use crate::record::current::{self, Active};
use crate::record::frame::AsyncStackFrame;
use crate::record::site::{self, AwaitSite, CallSite, SiteId};
use crate::shim::{AtomicPtr, Ordering};
use crate::task::place;
use crate::task::record::TaskRecord;
use crate::task::root::{self, Polling};
use crate::task::{end, relink};

/// A future wrapped so that each of its polls records an async stack frame.
///
/// Built by `#[traced_async]`, by [`TracedExt::traced`] and by
/// [`TracedExt::traced_named`]. It is `Send`/`Sync` exactly when the inner
/// future is, and it is 24 bytes larger than the inner future.
#[pin_project::pin_project(PinnedDrop)]
#[must_use = "futures do nothing unless polled"]
// The frame first: its address is the future's, which the poll path has
// in a register already. The size is what it would be in any order: 24
// bytes more than the inner future, or 32 for an inner future aligned to
// 16, rounded either way.
#[repr(C)]
pub struct Traced<F> {
    frame: AsyncStackFrame,
    #[pin]
    inner: F,
}

impl<F> std::fmt::Debug for Traced<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traced")
            .field("call_site", &self.frame.call_site())
            .field("task_id", &self.task_id())
            .finish_non_exhaustive()
    }
}

impl<F> Traced<F> {
    /// Wraps `inner` with a static call-site record. Used by the
    /// `#[traced_async]` expansion.
    #[doc(hidden)]
    pub fn new(inner: F, call_site: &'static CallSite) -> Self {
        Traced {
            frame: AsyncStackFrame::new(call_site),
            inner,
        }
    }

    fn with_caller(
        inner: F,
        location: &'static Location<'static>,
        name: Option<&'static str>,
    ) -> Self {
        Self::new(inner, site::call_site_for_caller(location, name))
    }

    /// The frame this future records.
    pub fn frame(&self) -> &AsyncStackFrame {
        &self.frame
    }

    /// The task id, if this future is a registered task root whose task is
    /// live.
    pub fn task_id(&self) -> Option<u64> {
        let p = self.frame.place.load(Ordering::Relaxed);
        if !place::is_root(p) || place::key_of(p) == place::UNTRACKED {
            return None;
        }
        let r = crate::task::registry::record(place::index(p))?;
        Some(r.id.load(Ordering::Acquire)).filter(|&id| id != 0)
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

/// Leaves the poll if it unwinds.
///
/// The normal exit is written out in `Traced::poll`, which forgets this
/// guard, so the landing pad stays a few stores long and does not weigh on
/// whether the poll is inlined. A child keeps its place in the task until
/// it is dropped; a root's task is left idle, not running.
struct Unwind<'a> {
    active: &'a Active,
    frame: &'a AsyncStackFrame,
    /// For a child: the current-frame word and the value to restore in it.
    child: Option<(&'a AtomicPtr<AsyncStackFrame>, *mut AsyncStackFrame)>,
    /// For a tracked root: its poll in progress.
    task: Option<Polling>,
}

impl Drop for Unwind<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        match self.child {
            None => root::unwind(self.frame, self.active, self.task),
            Some((word, parent)) => word.store(parent, Ordering::Relaxed),
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
        let a = current::current();
        // A child passes the caller's `Context` through; a tracked root
        // polls with its task's waker. One `&mut Context` for both, so that
        // the inner poll below is the only call to it.
        let waker;
        let mut root_cx;
        let mut task = None;
        let (cx, child): (&mut Context<'_>, _) = match a.current() {
            Some(word) => {
                let parent = word.load(Ordering::Relaxed);
                enter_child(frame, word, parent, a);
                (cx, Some((word, parent)))
            }
            None => match root::enter(frame, a, cx) {
                Some((polling, lent)) => {
                    task = Some(polling);
                    waker = lent;
                    root_cx = Context::from_waker(&waker);
                    // SAFETY: only the lifetime parameter changes, to the
                    // caller's (`Context` is invariant in it). The result is
                    // used for the single `inner.poll` call below, while
                    // `waker` is alive. `Future::poll` is generic over its
                    // `Context`'s lifetime, so the callee cannot keep the
                    // borrowed waker past the call (it can only clone it),
                    // whatever lifetimes its own type carries.
                    let root_cx = unsafe { &mut *(&raw mut root_cx).cast::<Context<'_>>() };
                    (root_cx, None)
                }
                None => (cx, None),
            },
        };
        let unwind = Unwind {
            active: a,
            frame,
            child,
            task,
        };
        let out = inner.poll(cx);
        std::mem::forget(unwind);
        match child {
            Some((word, parent)) => {
                word.store(parent, Ordering::Relaxed);
                if out.is_ready() {
                    let p = frame.take_place();
                    relink::unlink(p, Some(a));
                }
            }
            None => root::exit(frame, a, task, out.is_pending()),
        }
        out
    }
}

/// A child's poll entry: stores the parent, moves the frame if its place no
/// longer holds (cold), and makes it the current frame.
#[inline(always)]
fn enter_child(
    frame: &AsyncStackFrame,
    word: &AtomicPtr<AsyncStackFrame>,
    current: *mut AsyncStackFrame,
    a: &Active,
) {
    let parent = current::untag(current);
    frame.parent.store(parent, Ordering::Relaxed);
    // SAFETY: `parent` is the thread's current frame, non-null while a task
    // root's poll runs, and its poll is on this thread's stack below us
    // (invariant of `current`), so it is alive.
    let parent_slot = place::slot_of(current, unsafe { &*parent });
    let mut p = frame.place.load(Ordering::Relaxed);
    if !place::holds(p, a.key(), parent_slot) {
        p = relink::relink(frame, p, parent_slot, a);
    }
    // A signal handler on this thread that finds the frame current finds
    // its parent set (see `current`'s invariants). No instruction; std's,
    // since loom models no signal handlers.
    std::sync::atomic::compiler_fence(Ordering::Release);
    word.store(current::tag(frame, place::own(p)), Ordering::Relaxed);
}

#[pin_project::pinned_drop]
impl<F> PinnedDrop for Traced<F> {
    fn drop(self: Pin<&mut Self>) {
        let frame: &AsyncStackFrame = self.project().frame;
        let p = frame.take_place();
        if p == 0 {
            return;
        }
        if place::is_root(p) {
            end::end_task(p);
        } else if current::with(|a| relink::unlink(p, Some(a))).is_none() {
            relink::unlink(p, None);
        }
    }
}

/// Records that the frame being polled on this thread is now suspended on
/// (or about to poll) the `.await` described by `site`.
///
/// Called by the `#[traced_async]` expansion immediately before each
/// `.await` (once per `.await` reached, not once per poll: a resumed body
/// continues inside the `.await`). Outside an instrumented poll it does
/// nothing.
#[inline(always)]
pub fn set_await_site(site: &'static AwaitSite) {
    // No closure (`LocalKey::with`): in an unoptimised build the cold path
    // below must be called from this function itself, directly under the
    // body, for the address it resolves to land in the body.
    let a = current::current();
    // SAFETY: per the invariant of `current`, a non-null frame is one whose
    // poll is on this thread's stack, hence alive.
    if let Some(frame) = unsafe { a.frame().as_ref() } {
        frame.set_await(site);
        if site.return_address.load(Ordering::Relaxed) == 0 {
            resolve_return_address(site);
        }
        publish_await(a, frame, site);
    }
}

/// Shows the frame's new `.await` in its slot of the task's published
/// stack, so readers see where a running frame is now without any per-poll
/// work (no section when it did not change).
#[inline(always)]
fn publish_await(a: &Active, frame: &AsyncStackFrame, site: &'static AwaitSite) {
    let own = place::own(frame.place.load(Ordering::Relaxed));
    if own == NO_SLOT {
        return;
    }
    // The current frame was placed in the running task on entry to its
    // poll.
    if let Some(r) = TaskRecord::running(a) {
        // The site's id, not `frame.site_id()`: that would load back the
        // word `set_await` has just stored.
        r.set_site(own, SiteId::at_await(site.id()));
    }
}

/// Records that the frame being polled on this thread finished the
/// `.await` it was suspended on and runs code between two `.await`s.
///
/// Called by the `#[traced_async]` expansion right after each `.await`.
/// Only the frame itself changes: its published slot keeps the `.await` it
/// last reached (a dump shows the innermost running frame without one), so
/// that a loop around one `.await` writes nothing for readers.
#[inline(always)]
pub fn clear_await_site() {
    // SAFETY: as in `set_await_site`.
    if let Some(frame) = unsafe { current::current().frame().as_ref() } {
        frame.clear_await();
    }
}

/// Resolves, once per `.await` site, an address in the awaiting function's
/// code that symbolises to the line of that `.await`, and caches it in the
/// site (see [`crate::record::frame`], "The return address").
///
/// [`set_await_site`] is always inlined into the body, at the `.await`, so
/// the address this cold function returns to lies in the body's code, inside
/// the inlined `set_await_site` whose call is spanned at the `.await`: its
/// symbols (innermost inlined first) include the body at the `.await`'s
/// line, which is what `__builtin_return_address(0)` in a never-inlined
/// child poll would give. The native stack is unwound once per site, never
/// in the steady state.
#[cold]
#[inline(never)]
fn resolve_return_address(site: &'static AwaitSite) {
    let me = resolve_return_address as *const () as usize;
    let setter = set_await_site as *const () as usize;
    let mut seen_me = false;
    let mut ra = 0usize;
    backtrace::trace(|f| {
        let start = f.symbol_address() as usize;
        if !seen_me {
            seen_me = start == me;
            return true;
        }
        // `set_await_site` itself, if it was not inlined after all.
        if start == setter {
            return true;
        }
        ra = f.ip() as usize;
        false
    });
    // `1` marks a site whose resolution failed, so it is not retried.
    site.return_address.store(ra.max(1), Ordering::Relaxed);
    // Any of the function's `.await`s lies in its body's code: the first
    // one resolved tells the walker where the body runs.
    if ra != 0 {
        let _ = site.call_site.body_address.compare_exchange(
            0,
            ra,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}
