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
//! - **Every poll** ([`enter`] and [`exit`], inlined into the root's
//!   `Traced::poll`): frees the frames that other threads retired, marks
//!   the task running on this thread, makes the root the thread's current
//!   frame in the record's `current` word, and lends the task's waker;
//!   after the inner poll, clears the current frame and marks the task
//!   idle, or scheduled if it woke itself. A poll that unwinds does the
//!   same ([`unwind`]), so a root kept after a caught panic is not shown
//!   running.
//! - **The end** ([`end_task`]): when the root completes, is dropped, or is
//!   polled as a child of another task (it then belongs to that task, and
//!   must not linger as a ghost), the record's id is cleared, its
//!   incarnation closed (frames of the ended task can no longer touch it),
//!   its chunks given back, its name and fallback waker (in its
//!   extension) released, and the task's reference to the record dropped.
//!   The last reference (the task's or a waker's) recycles the record
//!   ([`recycle`]).

use std::sync::Arc;
use std::task::Context;

use crate::record::clock;
use crate::record::current::Active;
use crate::record::frame::AsyncStackFrame;
use crate::sync::Ordering;
use crate::task::place::{self, INCARNATION_LIMIT, UNTRACKED};

use crate::task::record::{TaskRecord, spawn as spawn_word, state};
use crate::task::stack::foreign;
use crate::task::waker::{self, Fallback, LentWaker};
use crate::task::{registry, spawn};

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
    let index = place::record(p);
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
    // sampler.
    a.thread_id();
    let seen = r.start_poll(clock::now_ms());
    a.enter_task(r, key, root);
    #[cfg(not(async_stack_loom))]
    if crate::task::probe::on() {
        crate::task::probe::poll_started(place::record(key), r, root);
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
    let self_wakes = a.leave_task(task.map(|t| t.record));
    if let Some(t) = task {
        let r = t.record;
        #[cfg(not(async_stack_loom))]
        if t.recording() {
            // The root's place still names its record (`end_task` below
            // takes it).
            let index = place::record(frame.place.load(Ordering::Relaxed));
            let woken = (r.woken_count() ^ t.seen()) & crate::task::record::state::SEEN_MASK != 0;
            crate::task::probe::poll_ended(index, r, pending, self_wakes, woken);
        }
        if pending {
            r.end_poll(clock::now_ms(), self_wakes, t.seen());
        } else {
            let p = frame.take_place();
            end_task_in(r, place::record(p));
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
        place::unlink(old, Some(a));
    }
    frame.parent.store(std::ptr::null_mut(), Ordering::Relaxed);
    #[cfg(not(async_stack_loom))]
    crate::task::probe::init_from_env();
    let spawn = spawn::take_pending();
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
            (s.parent, spawn_word::pack(site, named))
        }
        None => (0, 0),
    };
    r.parent.store(parent, Ordering::Relaxed);
    r.spawn.store(spawn_word, Ordering::Relaxed);
    // Last: readers report the record once its id is set.
    r.id.store(registry::next_id(), Ordering::Release);
    let p = place::root(place::key(index, inc));
    frame.place.store(p, Ordering::Relaxed);
    p
}

/// Ends the task whose root's place was `p` (see the module docs). Any
/// thread; does nothing for an untracked root.
pub(crate) fn end_task(p: u64) {
    if !place::is_root(p) || place::key_of(p) == UNTRACKED {
        return;
    }
    let index = place::record(p);
    if let Some(r) = registry::record(index) {
        end_task_in(r, index);
    }
}

/// [`end_task`] for a tracked task whose record (index `index`) the caller
/// has: the root's own exit, when it completes.
pub(crate) fn end_task_in(r: &TaskRecord, index: u32) {
    #[cfg(not(async_stack_loom))]
    if crate::task::probe::on() {
        crate::task::probe::task_ended(index, r.id.load(Ordering::Relaxed));
    }
    r.id.store(0, Ordering::Release);
    r.close_incarnation();
    r.release_chunks();
    // `parent` and `spawn` stay: nobody reads a free record's, and the
    // next task's registration writes both.
    let spawn = r.spawn.load(Ordering::Relaxed);
    let named = spawn_word::named(spawn);
    if let Some(e) = spawn_word::has_ext(spawn)
        .then(|| registry::ext(index))
        .flatten()
    {
        // Clearing an empty name is skipped: an `arc-swap` store is not
        // free.
        if named {
            e.name.store(None);
        }
        // Most tasks have none: a load, not a read-modify-write.
        let f = match e.fallback.load(Ordering::Acquire) {
            f if f.is_null() => f,
            _ => e.fallback.swap(std::ptr::null_mut(), Ordering::AcqRel),
        };
        if !f.is_null() {
            // SAFETY: the extension owned this `Arc` (see `fallback`), and
            // the task's polls are over.
            drop(unsafe { Arc::from_raw(f.cast_const().cast::<Fallback>()) });
        }
    }
    // The task's own reference to the record. When it is the only one
    // left, no waker of the task exists, and none can appear (a waker is
    // cloned from a waker, or from the one lent to the task's poll, which
    // is over): the record is recycled without a read-modify-write. The
    // acquire load pairs with the release decrement of the last waker
    // dropped, as in `waker::release`.
    if r.refs.load(Ordering::Acquire) == 1 {
        r.refs.store(0, Ordering::Relaxed);
        recycle(r, index);
    } else {
        let _ = waker::release(index);
    }
}

/// The last reference to record `index` is gone: its executor waker is
/// dropped and the record goes back to the free list, unless its
/// incarnations are used up (then it is retired for good).
pub(crate) fn recycle(r: &TaskRecord, index: u32) {
    // SAFETY: `refs` just reached 0 on this thread, with acquire ordering
    // (see `waker::release`): the cell holds the task's executor waker and
    // nothing else can read it.
    drop(unsafe { r.take_waker() });
    if foreign::incarnation(r.foreign.load(Ordering::Relaxed)) < INCARNATION_LIMIT {
        registry::free_record(index);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, Waker};

    use super::INCARNATION_LIMIT;
    use crate::sync::Ordering;
    use crate::task::registry;
    use crate::task::stack::foreign;
    use crate::{TaskState, TracedExt};

    type Child = Arc<Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>>;

    /// The record index of live task `id`.
    fn index_of(id: u64) -> u32 {
        (0..registry::record_count() as u32)
            .find(|&i| registry::record(i).is_some_and(|r| r.id.load(Ordering::Relaxed) == id))
            .expect("a live task has a record")
    }

    /// A task root named `name` that polls `child` (while it is there) on
    /// its first poll and completes on its second.
    fn root_polling(
        name: &'static str,
        child: Child,
    ) -> crate::Traced<impl Future<Output = ()> + Send> {
        let mut first = true;
        std::future::poll_fn(move |cx| {
            if !std::mem::take(&mut first) {
                return Poll::Ready(());
            }
            if let Some(f) = child.lock().unwrap().as_mut() {
                assert!(f.as_mut().poll(cx).is_pending());
            }
            Poll::Pending
        })
        .traced_named(name)
    }

    fn names(id: u64) -> Vec<String> {
        let d = crate::dump();
        let t = d.task(id).expect("the task is live");
        assert_eq!(t.hidden_frames, 0);
        t.frames.iter().map(|f| f.function.to_string()).collect()
    }

    /// The record keeps one count of wakes: those from outside the task's
    /// polls as they happen, those from inside a poll when it ends. A poll
    /// that woke its own task ends scheduled, a poll without wakes ends
    /// idle, and a wake from outside makes an idle task scheduled.
    #[test]
    fn wakes_from_inside_and_outside_polls_are_counted_once_each() {
        let mut cx = Context::from_waker(Waker::noop());
        let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
        let keep = kept.clone();
        let mut polls = 0;
        let mut task = Box::pin(
            std::future::poll_fn(move |cx| {
                polls += 1;
                if polls == 1 {
                    cx.waker().wake_by_ref();
                    cx.waker().wake_by_ref();
                }
                *keep.lock().unwrap() = Some(cx.waker().clone());
                Poll::<()>::Pending
            })
            .traced_named("counts-its-wakes"),
        );
        let seen = |id| {
            let d = crate::dump();
            let t = d.task(id).expect("the task is live");
            (t.state, t.wakes, t.polls)
        };
        assert!(task.as_mut().poll(&mut cx).is_pending());
        let id = task.task_id().unwrap();
        assert_eq!(seen(id), (TaskState::Scheduled, 2, 1));
        assert!(task.as_mut().poll(&mut cx).is_pending());
        assert_eq!(seen(id), (TaskState::Idle, 2, 2));
        let waker = kept.lock().unwrap().take().unwrap();
        std::thread::spawn(move || waker.wake()).join().unwrap();
        assert_eq!(seen(id), (TaskState::Scheduled, 3, 2));
        assert!(task.as_mut().poll(&mut cx).is_pending());
        assert_eq!(seen(id), (TaskState::Idle, 3, 3));
    }

    /// A frame that outlives its task keeps the incarnation it was placed
    /// in, and a record is retired once its incarnations are used up
    /// (`INCARNATION_LIMIT`, 16 in these tests), so the frame can never
    /// give back a slot of a later task in the same record: the wrap of the
    /// issue's 16-bit generations cannot happen.
    #[test]
    fn a_frame_outliving_its_task_never_touches_a_later_task_of_its_record() {
        // A fresh thread: its cache of free records hands back the record
        // it freed last, so the tasks below reuse one record.
        std::thread::spawn(|| {
            let mut cx = Context::from_waker(Waker::noop());
            let survivor: Child = Arc::new(Mutex::new(Some(Box::pin(
                std::future::pending::<()>().traced_named("survivor"),
            ))));
            let mut a = Box::pin(root_polling("task-a", survivor.clone()));
            assert!(a.as_mut().poll(&mut cx).is_pending());
            let id_a = a.task_id().unwrap();
            let index = index_of(id_a);
            let record = registry::record(index).unwrap();
            let first_inc = foreign::incarnation(record.foreign.load(Ordering::Relaxed));
            assert_eq!(names(id_a), ["task-a", "survivor"]);
            // Task A ends; its child lives on outside it.
            assert!(a.as_mut().poll(&mut cx).is_ready());
            drop(a);

            // Task B takes the same record and the same slot for its child.
            let b_child: Child = Arc::new(Mutex::new(Some(Box::pin(
                std::future::pending::<()>().traced_named("b-child"),
            ))));
            let mut b = Box::pin(root_polling("task-b", b_child.clone()));
            assert!(b.as_mut().poll(&mut cx).is_pending());
            let id_b = b.task_id().unwrap();
            assert_eq!(
                index_of(id_b),
                index,
                "the thread's cache gives the record back"
            );
            assert_eq!(names(id_b), ["task-b", "b-child"]);

            // The survivor is dropped on another thread: it retires its old
            // place, which belongs to an ended incarnation.
            let s = survivor.clone();
            std::thread::spawn(move || drop(s.lock().unwrap().take()))
                .join()
                .unwrap();
            assert_eq!(
                names(id_b),
                ["task-b", "b-child"],
                "task B's child keeps its slot"
            );
            assert!(b.as_mut().poll(&mut cx).is_ready());
            drop(b);
            drop(b_child);

            // Run tasks until the record stops coming back: it serves each
            // incarnation from `first_inc` to the limit once, then retires.
            let mut served = 2; // tasks A and B
            loop {
                let mut t = Box::pin(root_polling("filler", Arc::new(Mutex::new(None))));
                assert!(t.as_mut().poll(&mut cx).is_pending());
                let here = index_of(t.task_id().unwrap());
                assert!(t.as_mut().poll(&mut cx).is_ready());
                if here != index {
                    break;
                }
                served += 1;
                assert!(
                    served < 2 * INCARNATION_LIMIT,
                    "the record is never retired"
                );
            }
            assert_eq!(served, INCARNATION_LIMIT - first_inc);
            let last = foreign::incarnation(record.foreign.load(Ordering::Relaxed));
            assert_eq!(last, INCARNATION_LIMIT);
            assert_eq!(record.id.load(Ordering::Relaxed), 0);
            // Never handed out again.
            for _ in 0..2 * registry::record_count().min(1000) {
                let mut t = Box::pin(root_polling("after", Arc::new(Mutex::new(None))));
                assert!(t.as_mut().poll(&mut cx).is_pending());
                assert_ne!(index_of(t.task_id().unwrap()), index);
            }
        })
        .join()
        .unwrap();
    }
}
