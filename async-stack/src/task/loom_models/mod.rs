//! The **loom models** of the task layer (`cfg(async_stack_loom)`), and
//! the set-up they share: a task registered the way `root::register` does
//! it, without a clock or an executor, and a reader's view of a copy.
//!
//! They sit above every file of the layer they model, so that no file of
//! the layer imports its tests.

mod record;
mod stack;
mod waker;

use std::task::Waker;

use crate::record::current::{self, Active};
use crate::record::frame::AsyncStackFrame;
use crate::record::site::CallSite;
use crate::shim::Ordering;
use crate::task::TaskState;
use crate::task::record::{RawTask, TaskRecord, state};
use crate::task::registry;
use crate::task::stack::{StackCopy, foreign};
use crate::task::{place, relink};

/// Call sites whose ids stand for the frames of the models.
pub(crate) static ROOT: CallSite = CallSite::new("root", "", "", 1, 1, true);
pub(crate) static CHILD: CallSite = CallSite::new("child", "", "", 2, 1, true);
pub(crate) static OTHER: CallSite = CallSite::new("other", "", "", 3, 1, true);

/// A registered task of a model.
#[derive(Clone, Copy)]
pub(crate) struct Task {
    pub(crate) index: u32,
    pub(crate) record: &'static TaskRecord,
    pub(crate) key: u64,
    pub(crate) root: &'static AsyncStackFrame,
}

/// A frame that lives for the rest of the model.
pub(crate) fn frame(site: &'static CallSite) -> &'static AsyncStackFrame {
    Box::leak(Box::new(AsyncStackFrame::new(site)))
}

/// Registers a task whose root frame is at `site`, with id `id`.
pub(crate) fn task(site: &'static CallSite, id: u64) -> Task {
    // SAFETY: a free record: `refs` was 0 and the cell holds no waker.
    register(site, id, |r| unsafe { r.put_waker(Waker::noop().clone()) })
}

/// [`task`], with `executor` as the executor's waker, kept boxed in the
/// record as for an executor whose vtable finds the table of vtables full.
pub(crate) fn task_with_boxed_waker(site: &'static CallSite, id: u64, executor: Waker) -> Task {
    // SAFETY: a free record: `refs` was 0 and the cell holds no waker.
    register(site, id, |r| unsafe { r.put_boxed_waker(executor) })
}

/// Registers a task; `put_waker` stores the executor's waker in its free
/// record.
fn register(site: &'static CallSite, id: u64, put_waker: impl FnOnce(&TaskRecord)) -> Task {
    let index = registry::alloc_record().expect("a free record");
    let record = registry::record(index).unwrap();
    let inc = foreign::incarnation(record.foreign.load(Ordering::Acquire));
    record.refs.store(1, Ordering::Relaxed);
    put_waker(record);
    record
        .state
        .store(state::pack(state::SCHEDULED, 0, 1), Ordering::Relaxed);
    record.polls.store(0, Ordering::Relaxed);
    record.wakes.store(0, Ordering::Relaxed);
    let root = frame(site);
    record.start_stack(root.site_id());
    record.id.store(id, Ordering::Release);
    let key = place::key(index, inc);
    root.place.store(place::root(key), Ordering::Relaxed);
    Task {
        index,
        record,
        key,
        root,
    }
}

/// Registers, with id `id`, a task whose root is not polled yet, as
/// `root::preregister` does for a spawn helper: the task's reference, no
/// waker, no frames, scheduled. Returns its place, for `root::adopt` and
/// `root::end_unadopted`, and its index.
pub(crate) fn preregistered(id: u64) -> (u64, u32) {
    let index = registry::alloc_record().expect("a free record");
    let record = registry::record(index).unwrap();
    let inc = foreign::incarnation(record.foreign.load(Ordering::Acquire));
    record.refs.store(1, Ordering::Relaxed);
    record.empty_stack();
    record
        .state
        .store(state::pack(state::SCHEDULED, 0, 1), Ordering::Relaxed);
    record.polls.store(0, Ordering::Relaxed);
    record.wakes.store(0, Ordering::Relaxed);
    record.id.store(id, Ordering::Release);
    (place::root(place::key(index, inc)), index)
}

/// Starts a poll of `t` on the thread of `a`, as `root::enter` does.
pub(crate) fn start_poll(t: Task, a: &Active) -> u64 {
    let seen = t.record.start_poll(2);
    a.enter_task(t.record.opaque(), &t.record.current, t.key, t.root);
    seen
}

/// Ends the poll, as `root::exit` does for a `Pending` return.
pub(crate) fn end_poll(t: Task, a: &Active, seen: u64) {
    let self_wakes = a.leave_task(Some(&t.record.current));
    t.record.end_poll(3, self_wakes, seen);
}

/// Polls `frame` as a child of the current frame of `a`: the entry of
/// `Traced::poll` for a child. Returns the value to restore.
pub(crate) fn enter_child(frame: &AsyncStackFrame, a: &Active) -> *mut AsyncStackFrame {
    let word = a.current().expect("a task poll runs");
    let parent = word.load(Ordering::Relaxed);
    let parent_frame = current::untag(parent);
    frame.parent.store(parent_frame, Ordering::Relaxed);
    // SAFETY: the parent frame is leaked, alive for the model.
    let parent_slot = place::slot_of(parent, unsafe { &*parent_frame });
    let mut p = frame.place.load(Ordering::Relaxed);
    if !place::holds(p, a.key(), parent_slot) {
        p = relink::relink(frame, p, parent_slot, a);
    }
    word.store(current::tag(frame, place::own(p)), Ordering::Relaxed);
    parent
}

/// The exit of a child's poll: `restore` is current again.
pub(crate) fn leave_child(a: &Active, restore: *mut AsyncStackFrame) {
    a.current().unwrap().store(restore, Ordering::Relaxed);
}

/// What a reader sees of a task: its id, state, and its frames as
/// `(depth, call-site id, running)`; `None` for no task or a stack that
/// stayed torn.
pub(crate) type View = (u64, TaskState, Vec<(u32, u32, bool)>);

/// Reads task `t`'s record as a dump does.
pub(crate) fn view(t: Task) -> Option<View> {
    let mut copy = StackCopy::default();
    let raw: RawTask = t.record.read(t.index, &mut copy, 4)?;
    if !raw.stack_copied {
        return None;
    }
    let frames = copy
        .frames
        .iter()
        .map(|f| (f.depth, f.site, f.running))
        .collect();
    Some((raw.id, raw.state, frames))
}

/// Runs `f` under loom with at most `preemptions` preemptions per
/// execution, whatever `LOOM_MAX_PREEMPTIONS` says: for models whose
/// threads take many steps (registering a task takes dozens), where the
/// default bound would explore for hours. Two preemptions still reach every
/// interleaving in which the reader is cut once inside each of the writer's
/// sections.
pub(crate) fn bounded_model<F>(preemptions: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}
