//! The life of a **task root**: a traced future polled while no traced
//! frame is active on its thread.
//!
//! - **First poll** ([`register`], cold): the root takes a record from the
//!   registry, stores the executor's waker there, takes slot 0 of the
//!   task's published stack, and records the spawn metadata a spawn helper
//!   left for it (see [`crate::task::spawn`]). Its place (see
//!   [`crate::task::place`]) then says "root of this record's incarnation".
//!   With no record left, it becomes an **untracked** root, once: it still
//!   links its children, is counted once, and never asks the registry
//!   again.
//! - **Before the first poll** ([`preregister`]): the tokio spawn helpers
//!   register the task as they spawn it, with no waker and no frames, so
//!   that dumps show it while it is queued; the first root that registers
//!   inside the helper's future takes that record over ([`adopt`]) instead
//!   of taking one, and the helper's future ends it if none does
//!   ([`end_unadopted`]).
//! - **Every poll** ([`enter`] and [`exit`], inlined into the root's
//!   `Traced::poll`): frees the frames that other threads retired, marks
//!   the task running on this thread, makes the root the thread's current
//!   frame in the record's `current` word, and lends the task's waker;
//!   after the inner poll, clears the current frame and marks the task
//!   idle, or scheduled if it woke itself. A poll that unwinds does the
//!   same ([`unwind`]), so a root kept after a caught panic is not shown
//!   running.
//! - **The end** ([`end_task`](end::end_task)): when the root completes,
//!   is dropped, or is polled as a child of another task (it then belongs
//!   to that task, and must not linger as a ghost), the record's id is
//!   cleared, its incarnation closed (frames of the ended task can no
//!   longer touch it), its chunks given back, its name and fallback waker
//!   (in its extension) released, and the task's reference to the record
//!   dropped.
//!   The last reference (the task's or a waker's) recycles the record
//!   ([`recycle`](registry::recycle)).

use std::sync::Arc;
use std::task::Context;

use crate::clock;
use crate::record::current::Active;
use crate::record::frame::AsyncStackFrame;
use crate::shim::Ordering;
use crate::task::place::{self, UNTRACKED};

use crate::task::record::{TaskRecord, spawn as spawn_word, state};
use crate::task::stack::foreign;
use crate::task::waker::{self, Fallback, LentWaker};
use crate::task::{end, registry, relink, spawn_info as spawn, tokio_task};

/// A tracked task's poll in progress: its record, the wake count the poll
/// started from, and whether wake recording was on when it started (then
/// its end is recorded too, so that the recorder sees both or neither).
#[derive(Clone, Copy)]
pub(crate) struct Polling {
    pub(crate) record: &'static TaskRecord,
    /// The wake count, with [`Polling::RECORDING`] set if recording.
    seen: u64,
}

impl Polling {
    /// The bit of `seen` that says wake recording is on (wake counts have
    /// 40 bits).
    const RECORDING: u64 = 1 << 63;

    /// The wake count the poll started from.
    #[inline(always)]
    pub(crate) fn seen(self) -> u64 {
        self.seen & !Self::RECORDING
    }

    #[inline(always)]
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    fn recording(self) -> bool {
        self.seen & Self::RECORDING != 0
    }
}

/// A task root's poll entry: registers it on its first poll, marks it
/// running and makes it the thread's current frame. Returns the poll in
/// progress and the waker to poll with, or `None` for an untracked root
/// (poll with the executor's context).
///
/// The first poll takes a cold call, then the same path as every other
/// poll, so that what this returns stays in registers.
#[inline(always)]
pub(crate) fn enter(
    frame: &AsyncStackFrame,
    a: &Active,
    cx: &Context<'_>,
) -> Option<(Polling, LentWaker)> {
    let p = frame.place.load(Ordering::Relaxed);
    let (p, r) = match place::tracked_root(p).and_then(registry::record) {
        Some(r) => (p, r),
        None => enter_first(frame, a, cx)?,
    };
    let index = place::index(p);
    // SAFETY: the live task holds a reference to its record.
    let waker = if unsafe { r.will_wake(cx.waker()) } {
        waker::lend(index)
    } else {
        fallback(index, cx)
    };
    Some((begin(r, place::key_of(p), frame, a), waker))
}

/// The task of `r` starts a poll on this thread, with `root` current.
#[inline(always)]
fn begin(r: &'static TaskRecord, key: u64, root: &AsyncStackFrame, a: &Active) -> Polling {
    r.collect_foreign();
    // Lists this thread, on its first task poll, for debuggers and the
    // sampler (the loom models have no OS threads to list).
    #[cfg(not(async_stack_loom))]
    crate::record::threads::thread_id(a);
    let seen = r.start_poll(clock::now_ms());
    a.enter_task(r.opaque(), &r.current, key, root);
    #[cfg(not(async_stack_loom))]
    if crate::task::probe::on() {
        crate::task::probe::poll_started(place::index(key), r, root);
        return Polling {
            record: r,
            seen: seen | Polling::RECORDING,
        };
    }
    Polling { record: r, seen }
}

/// [`enter`] on a first poll, and for an untracked root: registers the
/// root if it is not one yet; returns its place and record if it is
/// tracked, else enters it untracked and returns `None`. A tracked root
/// whose record cannot be found (cannot happen: records are never freed)
/// is polled untracked too, rather than panicking inside the executor.
#[cold]
#[inline(never)]
fn enter_first(
    frame: &AsyncStackFrame,
    a: &Active,
    cx: &Context<'_>,
) -> Option<(u64, &'static TaskRecord)> {
    let mut p = frame.place.load(Ordering::Relaxed);
    if !place::is_root(p) {
        p = register(frame, a, cx);
    }
    match place::tracked_root(p).and_then(registry::record) {
        Some(r) => Some((p, r)),
        None => {
            a.enter_untracked(frame, place::key_of(p));
            None
        }
    }
}

/// The executor passed a waker that would not wake like the one in the
/// record: lend the task's fallback waker for it (see
/// [`crate::task::waker`]).
#[cold]
#[inline(never)]
fn fallback(index: u32, cx: &Context<'_>) -> LentWaker {
    let Some(ext) = registry::ext_or_make(index) else {
        // Not a record index (cannot happen): the record's waker still
        // reaches the task it was made for.
        return waker::lend(index);
    };
    let mut cur = ext.fallback.load(Ordering::Relaxed).cast::<Fallback>();
    // SAFETY: `fallback` holds null or a pointer from `Arc::into_raw`,
    // owned by the extension until the task ends, which it has not (its
    // root is polling).
    let usable = unsafe { cur.as_ref() }.is_some_and(|f| f.wakes_like(cx.waker()));
    if !usable {
        if let Some(r) = registry::record(index) {
            // Only the task's polling thread writes `spawn` after its
            // registration; the end of the task looks for the fallback.
            let w = r.spawn.load(Ordering::Relaxed);
            r.spawn.store(w | spawn_word::FALLBACK, Ordering::Relaxed);
        }
        let new = Arc::into_raw(Fallback::new(index, cx.waker()));
        ext.fallback.store(new.cast_mut().cast(), Ordering::Release);
        if !cur.is_null() {
            // SAFETY: the extension owned this `Arc`, and no lent waker of
            // it outlives the poll that lent it (this one is a new poll).
            drop(unsafe { Arc::from_raw(cur) });
        }
        cur = new.cast_mut();
    }
    // SAFETY: `cur` comes from `Arc::into_raw` and is owned by the
    // extension until the task ends, after every poll of the task, so it
    // outlives the waker lent for this poll.
    unsafe { Fallback::lend(cur) }
}

/// A task root's poll exit: no frame runs; the task (`task`: the poll in
/// progress) is idle or scheduled, or it ends if it completed.
#[inline(always)]
pub(crate) fn exit(frame: &AsyncStackFrame, a: &Active, task: Option<Polling>, pending: bool) {
    let self_wakes = a.leave_task(task.map(|t| &t.record.current));
    if let Some(t) = task {
        let r = t.record;
        #[cfg(not(async_stack_loom))]
        if t.recording() {
            // The root's place still names its record (`end_task` below
            // takes it).
            let index = place::index(frame.place.load(Ordering::Relaxed));
            let woken = (r.woken_count() ^ t.seen()) & crate::task::record::state::SEEN_MASK != 0;
            crate::task::probe::poll_ended(index, r, pending, self_wakes, woken);
        }
        if pending {
            r.end_poll(clock::now_ms(), self_wakes, t.seen());
        } else {
            let p = frame.take_place();
            end::end_task_in(r, place::index(p));
        }
    }
}

/// Leaves a task root's poll that unwound: like a `Pending` return, so a
/// root kept after a caught panic is shown idle, not running.
#[cold]
#[inline(never)]
pub(crate) fn unwind(frame: &AsyncStackFrame, a: &Active, task: Option<Polling>) {
    exit(frame, a, task, true);
}

/// Registers a task root on its first poll and returns its place (untracked
/// if no record was left).
#[cold]
#[inline(never)]
fn register(frame: &AsyncStackFrame, a: &Active, cx: &Context<'_>) -> u64 {
    // A frame polled as a child before keeps no place there, and has no
    // parent now.
    let old = frame.take_place();
    if old != 0 {
        relink::unlink(old, Some(a));
    }
    frame.parent.store(std::ptr::null_mut(), Ordering::Relaxed);
    #[cfg(not(async_stack_loom))]
    crate::task::probe::init_from_env();
    let spawn = spawn::take_pending();
    // The first root of the helper's poll takes over the task registered
    // at spawn; the others carry its metadata in records of their own.
    if spawn.first()
        && let Some(p) = spawn.get().and_then(|s| adopt(frame, cx, s.pre()))
    {
        return p;
    }
    let Some(index) = registry::alloc_record() else {
        let p = place::root(UNTRACKED);
        frame.place.store(p, Ordering::Relaxed);
        return p;
    };
    let r = registry::record(index).expect("an allocated record exists");
    let inc = foreign::incarnation(r.foreign.load(Ordering::Acquire));
    // No waker refers to a free record, so nobody reads its waker cell.
    r.refs.store(1, Ordering::Relaxed);
    // SAFETY: `refs` was 0 (a free record) and the cell holds no waker
    // (`recycle` took it, or it was never written).
    unsafe { r.put_waker(cx.waker().clone()) };
    r.start_stack(frame.site_id());
    let tokio = file_under_tokio_task(index);
    // A root filed under a tokio task takes an id that orders it after
    // every root filed before it (see `tokio_task`'s docs).
    let id = if tokio != 0 {
        registry::next_ordered_id()
    } else {
        registry::next_id()
    };
    fill(r, index, spawn.get(), tokio, id);
    let p = place::root(place::key(index, inc));
    frame.place.store(p, Ordering::Relaxed);
    p
}

/// Fills the record `r` (index `index`) of a new task: its counters, its
/// state (scheduled, since now), what it was spawned with, and, last, its
/// id, from which readers report it. Inlined into both (cold) callers.
#[inline(always)]
fn fill(r: &TaskRecord, index: u32, spawn: Option<&spawn::SpawnInfo>, tokio: u32, id: u64) {
    r.polls.store(0, Ordering::Relaxed);
    r.wakes.store(0, Ordering::Relaxed);
    r.self_wakes.store(0, Ordering::Relaxed);
    r.state.store(
        state::pack(state::SCHEDULED, 0, clock::now_ms()),
        Ordering::Relaxed,
    );
    let (parent, spawn_word) = match spawn {
        Some(s) => {
            let site = crate::record::site::call_site_for_caller(s.location, None).id();
            // Only a named task needs its extension (and its page).
            let named = match &s.name {
                Some(name) => registry::ext_or_make(index)
                    .map(|ext| ext.name.store(Some(name.clone())))
                    .is_some(),
                None => false,
            };
            // Another root of the first poll: the parent is in the record
            // the first one took over.
            let parent = s.parent().unwrap_or_else(registered_parent);
            (parent, spawn_word::pack(site, named))
        }
        None => (0, 0),
    };
    r.parent.store(parent, Ordering::Relaxed);
    r.spawn.store(spawn_word | tokio, Ordering::Relaxed);
    // Last: readers report the record once its id is set.
    r.id.store(id, Ordering::Release);
}

/// Registers, at its spawn, the task that `info` (a spawn helper's, not
/// handed to any executor yet) will be, so that dumps show it while it
/// waits for its first poll: scheduled since now, no frames, its name,
/// spawn site and parent. Returns the place its root takes over on that
/// poll ([`adopt`]), or `0` when no record is left (the root then
/// registers as usual). Any thread; the record is this thread's until the
/// future is handed over, which orders everything written here before
/// the poll that adopts it, or the drop that ends it ([`end_unadopted`]).
pub(crate) fn preregister(info: &spawn::SpawnInfo) -> u64 {
    let Some(index) = registry::alloc_record() else {
        return 0;
    };
    let r = registry::record(index).expect("an allocated record exists");
    let inc = foreign::incarnation(r.foreign.load(Ordering::Acquire));
    // The task's own reference. No waker is stored: none exists before the
    // first poll lends one.
    r.refs.store(1, Ordering::Relaxed);
    r.empty_stack();
    fill(r, index, Some(info), 0, registry::next_id());
    place::root(place::key(index, inc))
}

/// The parent of the task registered at spawn as `pre`, for another root
/// of the poll whose first root took it over: `0` once that record holds
/// another incarnation (the first root ended within the poll). Read
/// between two reads of the incarnation, so that a parent read across a
/// recycling is not taken.
fn registered_parent(pre: u64) -> u64 {
    let Some(r) = place::tracked_root(pre).and_then(registry::record) else {
        return 0;
    };
    let ours =
        || foreign::incarnation(r.foreign.load(Ordering::Acquire)) == place::incarnation(pre);
    if !ours() {
        return 0;
    }
    let parent = r.parent.load(Ordering::Acquire);
    if ours() { parent } else { 0 }
}

/// The root polled first inside a spawn helper's future takes over the
/// task registered at its spawn (`pre`, see [`preregister`]): its waker,
/// its stack, its tokio task; id, name, parent and spawn site stay.
/// `None` if there is none to take (`pre` is `0`: no record was left at
/// the spawn).
pub(crate) fn adopt(frame: &AsyncStackFrame, cx: &Context<'_>, pre: u64) -> Option<u64> {
    if pre == 0 {
        return None;
    }
    let index = place::tracked_root(pre)?;
    // Only the helper's future ends the task before a root takes it over,
    // and it is polling now with the metadata still offered: the task is
    // there, not taken over (checked in debug builds).
    let r = registry::record(index)?;
    debug_assert!(unadopted(r, pre), "the task registered at spawn is live");
    // SAFETY: the record's only reference is the task's own (`refs` is 1)
    // and its cell holds no waker: no poll of the task has lent one yet.
    unsafe { r.put_waker(cx.waker().clone()) };
    // For the roots of the task's later polls (this one may end first).
    spawn::adopted(r.parent.load(Ordering::Relaxed));
    // Filed before the stack starts: a reader that sees the root in slot 0
    // sees the tokio task too (the section's end orders them).
    let tokio = file_under_tokio_task(index);
    if tokio != 0 {
        let w = r.spawn.load(Ordering::Relaxed);
        r.spawn.store(w | tokio, Ordering::Relaxed);
    }
    r.start_stack(frame.site_id());
    frame.place.store(pre, Ordering::Relaxed);
    Some(pre)
}

/// Whether `r` holds the task registered at spawn as `pre`, still waiting
/// for its root: the same incarnation, and no poll nor stack yet.
fn unadopted(r: &TaskRecord, pre: u64) -> bool {
    foreign::incarnation(r.foreign.load(Ordering::Acquire)) == place::incarnation(pre)
        && r.id.load(Ordering::Relaxed) != 0
        && r.not_started()
}

/// Ends the task registered at spawn as `pre` if no root took it over:
/// the spawn helper's future was dropped before its first poll (an abort,
/// a runtime shut down), or that poll registered no root (the metadata
/// then waits for a later root, as without pre-registration). Any thread
/// that owns the future. Returns the parent the task was registered with,
/// `0` if it did not end here.
pub(crate) fn end_unadopted(pre: u64) -> u64 {
    if let Some(index) = place::tracked_root(pre)
        && let Some(r) = registry::record(index)
        && unadopted(r, pre)
    {
        let parent = r.parent.load(Ordering::Relaxed);
        end::end_task_in(r, index);
        return parent;
    }
    0
}

/// Files the root of record `index` under the tokio task polling it, if
/// any (see [`crate::task::tokio_task`]): stores the tokio task's id in
/// the registry's side table and returns the `spawn` word's `tokio` bit,
/// `0` outside a tokio task. Written before the record's id, like the rest
/// of what the task was spawned with.
#[inline]
fn file_under_tokio_task(index: u32) -> u32 {
    let Some(id) = tokio_task::current() else {
        return 0;
    };
    match registry::tokio_id_or_make(index) {
        Some(entry) => {
            entry.store(id, Ordering::Relaxed);
            spawn_word::TOKIO
        }
        // Not a record index (cannot happen): a task of its own.
        None => 0,
    }
}
