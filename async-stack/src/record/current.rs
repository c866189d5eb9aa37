//! The thread's active async stack: which frame is being polled right now,
//! and which task it belongs to.
//!
//! This is the only place that holds the thread-local state. Invariants:
//!
//! - `cur` is non-null exactly while a task root's `poll` is on this
//!   thread's native stack. It points to the word that holds the thread's
//!   **current frame** during that poll: the `polled` word of the task's
//!   published stack (see [`crate::task::published`]), so that readers of
//!   the task see which frame runs without any store of its own, or `own`
//!   for a root that the registry could not take.
//! - While `cur` is non-null, the current frame is non-null, and its `poll`
//!   is on this thread's native stack. [`Traced`](crate::Traced) sets it on
//!   entry and restores the previous value on every exit path, unwinding
//!   included (a drop guard). So every frame reachable from the current
//!   frame through `parent` links is alive: each one is an ancestor whose
//!   `poll` has not returned.
//! - `task` is non-null while a tracked task root's poll is on the stack,
//!   and every frame whose poll is on the stack below it is linked into
//!   that task.
//! - Every field is a plain `Cell` or an atomic word; a signal handler on
//!   this thread only ever reads them.

use std::cell::Cell;

use crate::record::frame::{AsyncStackFrame, link};
use crate::record::site::AwaitSite;
use crate::sync::{AtomicPtr, Ordering};
use crate::task::TaskSlot;
use crate::task::spawn::SpawnInfo;

/// Per-thread active state. `#[repr(C)]` for debugger scripts.
#[repr(C)]
pub(crate) struct Active {
    /// The word holding the current frame (see the module docs); null
    /// outside task roots' polls.
    pub(crate) cur: Cell<*const AtomicPtr<AsyncStackFrame>>,
    /// The current-frame word of a task root that the registry could not
    /// take (it was full).
    pub(crate) own: AtomicPtr<AsyncStackFrame>,
    pub(crate) task: Cell<*const TaskSlot>,
    /// How many times the task being polled woke itself during this poll.
    pub(crate) self_wakes: Cell<u32>,
    /// Spawn metadata handed from a spawn helper to the task root it polls.
    pub(crate) pending_spawn: Cell<*const SpawnInfo>,
}

macro_rules! new_active {
    () => {
        Active {
            cur: Cell::new(std::ptr::null()),
            own: AtomicPtr::new(std::ptr::null_mut()),
            task: Cell::new(std::ptr::null()),
            self_wakes: Cell::new(0),
            pending_spawn: Cell::new(std::ptr::null()),
        }
    };
}

#[cfg(not(async_stack_loom))]
thread_local! {
    static ACTIVE: Active = const { new_active!() };
}

// loom's atomics have no `const` constructor. The loom models never poll a
// traced future, so this initialiser never runs.
#[cfg(async_stack_loom)]
thread_local! {
    static ACTIVE: Active = new_active!();
}

impl Active {
    /// The id of the task being polled on this thread; `0` if none. (A
    /// task slot holds its task's id for as long as the task is
    /// registered, which covers every one of its polls.)
    #[inline(always)]
    pub(crate) fn task_id(&self) -> u64 {
        // SAFETY: `task` is null or a `&'static TaskSlot` (module invariant).
        unsafe { self.task.get().as_ref() }.map_or(0, |t| t.id.load(Ordering::Relaxed))
    }

    /// The word holding the current frame, while a task root's poll runs.
    #[inline(always)]
    pub(crate) fn cur_word(&self) -> Option<&AtomicPtr<AsyncStackFrame>> {
        // SAFETY: `cur` is null, or points to `own` (which lives as long as
        // `self`) or to the `polled` word of a `&'static TaskSlot` (module
        // invariant).
        unsafe { self.cur.get().as_ref() }
    }

    /// The frame being polled on this thread; null if none.
    #[inline(always)]
    pub(crate) fn frame(&self) -> *const AsyncStackFrame {
        match self.cur_word() {
            Some(word) => word.load(Ordering::Relaxed),
            None => std::ptr::null(),
        }
    }
}

/// Runs `f` with this thread's active state.
///
/// Returns `None` only during thread teardown, when thread-locals are gone.
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&Active) -> R) -> Option<R> {
    ACTIVE.try_with(f).ok()
}

/// This thread's active state, during thread teardown too.
///
/// `Active` has no destructor and a `const` initialiser, so on every target
/// with native thread-locals (`#[thread_local]`: Linux, macOS, Windows, the
/// BSDs, Android, ...) std stores it in a plain thread-local static that is
/// never in a destroyed state: this cannot fail and compiles to an address
/// computation. (On a target without native thread-locals, a traced future
/// polled from another thread-local's destructor would panic here; [`with`]
/// is the fallible form for paths off the poll.)
///
/// Returned as a reference rather than through a closure so that the poll
/// path stays one straight-line function that the compiler inlines into the
/// parent's poll.
#[inline(always)]
pub(crate) fn current() -> &'static Active {
    const _: () = assert!(!std::mem::needs_drop::<Active>());
    // SAFETY: the storage of a thread-local without destructor lives as
    // long as its thread, and `Active` is `!Sync` (it holds `Cell`s), so
    // the reference cannot leave this thread, which is alive while it uses
    // it.
    ACTIVE.with(|a| unsafe { &*(a as *const Active) })
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
    let a = current();
    // SAFETY: per the module invariant, a non-null `frame` points to a frame
    // whose poll is on this thread's stack, hence alive.
    if let Some(frame) = unsafe { a.frame().as_ref() } {
        frame.await_site.store(
            site as *const AwaitSite as *mut AwaitSite,
            Ordering::Relaxed,
        );
        if site.return_address.load(Ordering::Relaxed) == 0 {
            resolve_return_address(site);
        }
        publish_await(a, frame, site.id());
    }
}

/// Records the frame's new await site in its key and publishes it in its
/// slot of its task's stack, so readers see where a running frame is now
/// without any per-poll work.
#[inline(always)]
fn publish_await(a: &Active, frame: &AsyncStackFrame, await_id: u32) {
    frame.set_key_await(await_id);
    // SAFETY: `task` is null or the `&'static TaskSlot` of the task whose
    // poll is on this thread's stack (module invariant). The active frame
    // was linked into that task on entry to its poll.
    if let Some(task) = unsafe { a.task.get().as_ref() }
        && let Some(slot) = link::slot(frame.link.load(Ordering::Relaxed))
    {
        task.stack.set_await(slot, await_id);
    }
}

/// Records that the frame being polled on this thread finished the
/// `.await` it was suspended on and runs code between two `.await`s.
///
/// Called by the `#[traced_async]` expansion right after each `.await`.
/// Only the frame itself changes: its published entry keeps the `.await`
/// it last reached (a dump shows the innermost running frame without one),
/// so that a loop around one `.await` writes nothing for readers.
#[inline(always)]
pub fn clear_await_site() {
    // SAFETY: as in `set_await_site`.
    if let Some(frame) = unsafe { current().frame().as_ref() } {
        frame
            .await_site
            .store(std::ptr::null_mut(), Ordering::Relaxed);
        frame.set_key_await(0);
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
}

/// The id of the task whose poll is running on this thread, if any.
pub fn current_task_id() -> Option<u64> {
    with(Active::task_id).filter(|&id| id != 0)
}
