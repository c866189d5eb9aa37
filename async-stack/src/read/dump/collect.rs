//! Collection: reads live tasks' records into the dump model.
//!
//! Each task record is copied under its sequence counter (see
//! [`crate::task`]); interned site ids are resolved through one snapshot of
//! the site tables per dump, so that resolving an id is an index, not a
//! lock. [`Reader`] does both, for one record at a time; on top of it,
//! [`dump_where`] collects a whole [`TaskDump`], and [`for_each_entry`]
//! hands each task, read into one reused scratch [`TaskInfo`], to a
//! visitor (the streaming dumps of `stream.rs`).

use std::borrow::Cow;

use std::collections::HashMap;

use super::{
    DUMP_FORMAT_VERSION, DumpFrame, DumpSummary, ResourceHolder, ResourceWait, SourceLocation,
    TaskDump, TaskInfo, TaskStatus,
};
use crate::record::site::SiteId;
use crate::record::site::{AwaitSite, CallSite, await_site_by_id, call_site_by_id};
use crate::task::TaskState;
use crate::task::record::{RawTask, TaskRecord};
use crate::task::registry;
use crate::task::stack::{CopiedFrame, StackCopy};
use crate::task::tokio_task::TokioTask;
use crate::waits::query::WaitingFor;
#[cfg(not(async_stack_loom))]
use crate::waits::{query::waits_by_task, resource::Registry};

/// Reads task records into the dump model, reusing from record to record
/// one clock reading, one stack copy, and one snapshot of the site tables.
///
/// A record is read in two steps: [`Reader::status`] (two loads: id and
/// state) for a filter to look at, then [`Reader::read`], which copies
/// the whole record as one instant. A task can move on in between, so the
/// state of the copy may differ from the status.
pub(super) struct Reader {
    /// The time every task's time in state is measured against.
    now_ms: u64,
    copy: StackCopy,
    sites: Sites,
    /// Stack copies that raced with a writer and were retried, so far.
    torn: u64,
    /// A name buffer kept while the scratch task has no name, so that a
    /// stream of tasks, named or not, allocates names once.
    spare_name: String,
    /// What the waiting roots wait for, read once per dump.
    waits: Waits,
}

impl Reader {
    pub(super) fn new() -> Self {
        Reader {
            now_ms: crate::clock::system_ms(),
            copy: StackCopy::default(),
            sites: Sites::new(),
            torn: 0,
            spare_name: String::new(),
            waits: Waits::now(),
        }
    }

    /// Id, state and time in state of the task in `record`, `None` if the
    /// record is free. Reads two words, not the stack.
    #[inline]
    pub(super) fn status(&self, record: &TaskRecord) -> Option<TaskStatus> {
        let (id, state, since_ms) = record.peek(self.now_ms)?;
        Some(TaskStatus {
            id,
            state,
            state_ms: self.now_ms.saturating_sub(since_ms),
        })
    }

    /// Copies `record` (at `index`) into `into`, reusing its buffers; `false` (and
    /// `into` unspecified) if the task ended meanwhile.
    pub(super) fn read(&mut self, index: u32, record: &TaskRecord, into: &mut TaskInfo) -> bool {
        let Some(raw) = record.read(index, &mut self.copy, self.now_ms) else {
            return false;
        };
        self.torn += u64::from(raw.torn);
        let copied = raw.stack_copied;
        self.fill(raw, into);
        // While the copy of its stack is at hand: which frame is where
        // tells which of the root's waits holds.
        let frames: &[CopiedFrame] = if copied { &self.copy.frames } else { &[] };
        self.waits.attach(into, frames);
        true
    }

    /// Stack copies retried so far.
    pub(super) fn torn_copies(&self) -> u64 {
        self.torn
    }

    /// Writes `raw` (whose stack is in `self.copy`) into `t`.
    fn fill(&mut self, raw: RawTask, t: &mut TaskInfo) {
        let copied: &[CopiedFrame] = if raw.stack_copied {
            &self.copy.frames
        } else {
            &[]
        };
        let sites = &self.sites;
        // The copy is already a tree in source order. One loop with one
        // closure, from an exact-size iterator, so that each frame is
        // written in place; see `dump_frame`.
        t.frames.clear();
        t.frames.extend(copied.iter().map(|f| dump_frame(f, sites)));
        let (root_call, _) = sites.resolve(raw.root_site);
        // A spawn helper's name, or else the root's explicit one
        // (`#[traced_async(name = ..)]`, `.traced_named(..)`), which the
        // record does not copy per task.
        let name = raw
            .name
            .as_deref()
            .map(crate::task::record::TaskName::as_str)
            .or_else(|| {
                root_call
                    .filter(|c| c.explicit_name() && !c.is_anonymous())
                    .map(CallSite::name)
            });
        match (name, &mut t.name) {
            (Some(name), Some(buf)) => {
                buf.clear();
                buf.push_str(name);
            }
            (Some(name), slot @ None) => {
                let mut buf = std::mem::take(&mut self.spare_name);
                buf.clear();
                buf.push_str(name);
                *slot = Some(buf);
            }
            (None, slot) => {
                if let Some(buf) = slot.take() {
                    self.spare_name = buf;
                }
            }
        }
        t.id = raw.id;
        t.tokio_id = raw.tokio.map(|k| k.id);
        t.branches.clear();
        t.branches.push(raw.id);
        t.state = raw.state;
        t.state_ms = self.now_ms.saturating_sub(raw.since_ms);
        t.polls = raw.polls;
        t.wakes = raw.wakes;
        t.parent = (raw.parent != 0).then_some(raw.parent);
        t.spawned_at = raw
            .location
            .map(|l| SourceLocation::new_static(l.file(), l.line(), l.column()));
        t.root = (raw.root_site != 0).then(|| function_of(root_call));
        t.hidden_frames = if raw.stack_copied {
            self.copy.hidden
        } else {
            0
        };
        t.stack_unavailable = !raw.stack_copied;
        t.waits.clear();
    }
}

/// An empty task to read records into.
pub(super) fn scratch_task() -> TaskInfo {
    TaskInfo {
        id: 0,
        tokio_id: None,
        branches: Vec::new(),
        name: None,
        state: TaskState::Idle,
        state_ms: 0,
        polls: 0,
        wakes: 0,
        parent: None,
        spawned_at: None,
        root: None,
        frames: Vec::new(),
        hidden_frames: 0,
        stack_unavailable: false,
        waits: Vec::new(),
    }
}

/// The dump frame of a copied one. The innermost running frame shows no
/// `.await`: it runs code of its own.
///
/// Always inlined into the loop that pushes the frame: returned from a
/// call, the 96-byte frame goes through the stack, and copying it into the
/// vector stalls on the narrower stores that wrote it (store forwarding
/// fails), which made up a third of a dump's time.
#[inline(always)]
fn dump_frame(f: &CopiedFrame, sites: &Sites) -> DumpFrame {
    let (call, at) = sites.resolve(f.site);
    let awaiting = if f.innermost { None } else { at };
    DumpFrame {
        depth: f.depth,
        function: function_of(call),
        defined_at: call.map(|c| SourceLocation::new_static(c.file(), c.line(), c.column())),
        awaiting_at: awaiting.map(AwaitSite::location),
        running: f.running,
    }
}

/// The site tables, copied once per dump so that resolving an id is an
/// index, not a lock. Every string is `'static`: frames borrow them.
struct Sites {
    calls: Vec<&'static CallSite>,
    awaits: Vec<&'static AwaitSite>,
}

impl Sites {
    fn new() -> Self {
        let (calls, awaits) = crate::record::site::snapshot();
        Sites { calls, awaits }
    }

    /// The call site with interned id `id`. Inlined into the frame loop,
    /// so that a frame is built in place rather than through a returned
    /// temporary.
    #[inline]
    fn call(&self, id: u32) -> Option<&'static CallSite> {
        let snapshot = (id as usize).checked_sub(1).and_then(|i| self.calls.get(i));
        match snapshot {
            Some(c) => Some(c),
            None => Self::late_call(id),
        }
    }

    /// The function and `.await` of a site field of a published word (see
    /// `crate::task::stack::word`).
    #[inline]
    fn resolve(&self, site: u32) -> (Option<&'static CallSite>, Option<&'static AwaitSite>) {
        let site = SiteId::from_raw(site);
        if site.is_await() {
            let at = self.await_site(site.id());
            (at.map(AwaitSite::call_site), at)
        } else {
            (self.call(site.id()), None)
        }
    }

    /// The `.await` site with interned id `id` (`0`: none).
    #[inline]
    fn await_site(&self, id: u32) -> Option<&'static AwaitSite> {
        let snapshot = (id as usize)
            .checked_sub(1)
            .and_then(|i| self.awaits.get(i));
        match snapshot {
            Some(a) => Some(a),
            None => Self::late_await(id),
        }
    }

    // A site registered after the snapshot (during this dump) is looked up
    // in the shared table instead.
    #[cold]
    #[inline(never)]
    fn late_call(id: u32) -> Option<&'static CallSite> {
        call_site_by_id(id)
    }

    #[cold]
    #[inline(never)]
    fn late_await(id: u32) -> Option<&'static AwaitSite> {
        await_site_by_id(id)
    }
}

/// The name a frame shows for its call site.
#[inline]
fn function_of(call: Option<&'static CallSite>) -> Cow<'static, str> {
    Cow::Borrowed(call.map_or("<unknown>", CallSite::function_static))
}

/// A live record filed under a tokio task, as the registry pass saw it:
/// read after the pass, with the other roots of its tokio task.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Filed {
    tokio: TokioTask,
    index: u32,
}

/// The most roots filed under tokio tasks that a streamed dump keeps aside
/// at once (24 bytes each: 768 KB). More take more passes over the
/// registry, each for a share of the tokio ids.
pub(super) const FILED_BATCH: usize = 1 << 15;

/// Visits every live entry that `keep` selects by its status, which it
/// sees before anything else of an entry is read: an entry it skips costs
/// a few loads per root, not a copy of its stacks. Each entry is read into
/// the same scratch [`TaskInfo`], so a pass allocates for one entry, not
/// for all of them (`visit` may take it, and the next one is then read
/// into a fresh one).
///
/// A task of its own is visited as the registry pass meets it, in registry
/// order. A root filed under a tokio task is put aside (its tokio task, its
/// order and its record: 24 bytes) and, after the pass, the roots of each
/// tokio task are read one after another and merged into one entry (see
/// [`TaskInfo::branches`]), tokio task by tokio task in the order of their
/// ids. At most `batch` roots are put aside at once, in a buffer of that
/// size taken when the first is met: with more, further passes over the
/// registry each take the roots of a share of the tokio ids (all the roots
/// of one tokio task fall in the same share). A root whose record changed
/// hands since a pass saw it is left out, as is a root registered after
/// the pass of its share: as if the dump had been taken before. So is the
/// tokio task of a task the first pass showed not polled yet (at most
/// `batch` of them noted, 16 bytes each), which its first poll filed
/// under it since.
pub(super) fn for_each_entry(
    mut keep: impl FnMut(&TaskStatus) -> bool,
    mut visit: impl FnMut(&mut TaskInfo),
    batch: usize,
) -> DumpSummary {
    let mut reader = Reader::new();
    let mut task = scratch_task();
    let mut tasks = 0;
    let mut visit = |t: &mut TaskInfo| {
        Waits::place_lines(t);
        visit(t);
    };
    let mut filed: Vec<Filed> = Vec::new();
    let mut filed_seen = 0usize;
    // Tasks spawned through a helper that the pass showed not polled yet
    // (record index, id), at most `batch` of them.
    let mut queued: Vec<(u32, u64)> = Vec::new();
    registry::for_each_record(|index, record| {
        let Some(status) = reader.status(record) else {
            return;
        };
        if let Some(tokio) = record.tokio_task(index) {
            filed_seen += 1;
            if filed.len() < batch {
                if filed.capacity() == 0 && batch != usize::MAX {
                    // The whole buffer at once, so that what a streamed
                    // dump allocates does not depend on how many roots
                    // there are (its pages are touched only as it fills).
                    filed.reserve_exact(batch);
                }
                filed.push(Filed { tokio, index });
            }
            return;
        }
        if keep(&status) && reader.read(index, record, &mut task) {
            tasks += 1;
            if task.not_polled_yet() && queued.len() < batch {
                queued.push((index, task.id));
            }
            visit(&mut task);
        }
    });
    // A task shown not polled yet whose first poll has filed it under its
    // tokio task since: its tokio task's entry is left out, as if the dump
    // had been taken before that poll (it would show the task twice).
    let mut shown_queued: Vec<u64> = queued
        .iter()
        .filter_map(|&(index, id)| {
            let record = registry::record(index)?;
            let tokio = record.tokio_task(index)?;
            (reader.status(record)?.id == id).then_some(tokio.id)
        })
        .collect();
    shown_queued.sort_unstable();
    let mut tokio = TokioEntries {
        reader: &mut reader,
        task: &mut task,
        branch: scratch_task(),
        shown_queued: &shown_queued,
    };
    if filed_seen <= batch {
        tasks += tokio.visit_all(&mut filed, &mut keep, &mut visit);
    } else {
        // Twice the shares the count asks for, so that an uneven share
        // (or roots registered since) seldom passes the batch.
        let shares = filed_seen.div_ceil(batch) as u64 * 2;
        for share in 0..shares {
            filed.clear();
            registry::for_each_record(|index, record| {
                if let Some(t) = record.tokio_task(index)
                    && share_of(t.id, shares) == share
                {
                    filed.push(Filed { tokio: t, index });
                }
            });
            tasks += tokio.visit_all(&mut filed, &mut keep, &mut visit);
        }
    }
    DumpSummary {
        tasks,
        torn_copies: reader.torn_copies(),
        untracked_roots: registry::untracked(),
    }
}

/// What the waiting roots wait for, read once per dump (see
/// [`crate::waits`]): nothing to read while nobody waits.
struct Waits {
    waiting: HashMap<u64, Vec<WaitingFor>>,
    now_ms: u64,
}

impl Waits {
    fn now() -> Self {
        // Under loom the waits-for graph has only its models.
        #[cfg(not(async_stack_loom))]
        let waiting = waits_by_task(Registry::global());
        #[cfg(async_stack_loom)]
        let waiting = HashMap::new();
        Waits {
            waiting,
            now_ms: crate::clock::now_ms(),
        }
    }

    /// Lists in `t`, just read from one root's record (whose stack copy
    /// is `frames`), what that root waits for: the first of its waits
    /// that holds, only while the frame that polled it is still suspended
    /// at that `.await` (see [`WaitingFor::holds_in`]).
    fn attach(&self, t: &mut TaskInfo, frames: &[CopiedFrame]) {
        if self.waiting.is_empty() {
            return;
        }
        let since = |ms: u64| self.now_ms.saturating_sub(ms);
        let Some(waits) = self.waiting.get(&t.id) else {
            return;
        };
        let Some(w) = waits.iter().find(|w| w.holds_in(frames)) else {
            return;
        };
        t.waits.push(ResourceWait {
            task: t.id,
            resource: w.kind.into(),
            created_at: SourceLocation::of(w.created_at),
            waiting_at: w
                .waiting_at
                .map(SourceLocation::of)
                .or_else(|| w.awaiting.clone()),
            waiting_ms: since(w.since_ms),
            holders: w
                .holders
                .iter()
                .map(|h| ResourceHolder {
                    task: h.task,
                    acquired_at: SourceLocation::of(h.acquired_at),
                    // Holds outside traced tasks are not timed.
                    held_ms: if h.task == 0 { 0 } else { since(h.since_ms) },
                    permits: h.permits,
                })
                .collect(),
            tokio_task: w.tokio_task,
        });
    }

    /// Gives each wait of the whole entry `t` that has no line of its own
    /// the line of the frame it shows under.
    fn place_lines(t: &mut TaskInfo) {
        if t.waits.is_empty() {
            return;
        }
        // A wait without a line of its own (a `JoinHandle` polled outside
        // a traced `.await`) is at the `.await` of the frame it shows
        // under.
        let lines: Vec<(usize, Option<SourceLocation>)> = t
            .wait_frames()
            .iter()
            .enumerate()
            .filter(|(_, (_, w))| w.waiting_at.is_none())
            .map(|(k, (frame, _))| (k, frame.and_then(|i| t.frames[i].awaiting_at.clone())))
            .collect();
        for (k, at) in lines {
            t.waits[k].waiting_at = at;
        }
    }
}

/// Which of `shares` shares tokio id `id` falls in (ids are sequential:
/// mixed first, so that shares are even).
fn share_of(id: u64, shares: u64) -> u64 {
    (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % shares
}

/// Reads the roots put aside by a pass of [`for_each_entry`], one tokio
/// task at a time, into one entry each.
struct TokioEntries<'a> {
    reader: &'a mut Reader,
    task: &'a mut TaskInfo,
    /// Scratch for the second root on of a tokio task.
    branch: TaskInfo,
    /// Tokio tasks (sorted ids) shown already, as not polled yet.
    shown_queued: &'a [u64],
}

impl TokioEntries<'_> {
    /// Visits the entry of each tokio task in `filed` that `keep` selects;
    /// returns how many it visited.
    fn visit_all(
        &mut self,
        filed: &mut [Filed],
        keep: &mut impl FnMut(&TaskStatus) -> bool,
        visit: &mut impl FnMut(&mut TaskInfo),
    ) -> usize {
        filed.sort_unstable();
        let mut visited = 0;
        for roots in filed.chunk_by(|a, b| a.tokio.id == b.tokio.id) {
            if self.shown_queued.binary_search(&roots[0].tokio.id).is_ok() {
                continue;
            }
            if self.read(roots, keep) {
                visited += 1;
                visit(self.task);
            }
        }
        visited
    }

    /// Reads the roots of one tokio task (`roots`, in first-poll order)
    /// into one entry, if `keep` selects its merged status; `false` if it
    /// did not, or if every root ended meanwhile.
    fn read(&mut self, roots: &[Filed], keep: &mut impl FnMut(&TaskStatus) -> bool) -> bool {
        let tokio_id = roots[0].tokio.id;
        let still_filed = |f: &Filed| {
            let record = registry::record(f.index)?;
            (record.tokio_task(f.index) == Some(f.tokio)).then_some(record)
        };
        let status = roots
            .iter()
            .filter_map(|f| self.reader.status(still_filed(f)?))
            .reduce(|a, b| {
                let (state, state_ms) = merged_state((a.state, a.state_ms), (b.state, b.state_ms));
                TaskStatus {
                    id: a.id,
                    state,
                    state_ms,
                }
            });
        if !status.is_some_and(|s| keep(&s)) {
            return false;
        }
        let mut read_any = false;
        for f in roots {
            let Some(record) = still_filed(f) else {
                continue;
            };
            let into = if read_any {
                &mut self.branch
            } else {
                &mut *self.task
            };
            if !self.reader.read(f.index, record, into) || into.tokio_id != Some(tokio_id) {
                continue;
            }
            if read_any {
                merge_branch(self.task, &self.branch);
            }
            read_any = true;
        }
        read_any
    }
}

/// The state of an entry with two roots in `a` and `b` (state, time in
/// state): running before scheduled before idle; among running or
/// scheduled roots the longest time, among idle ones the shortest (the
/// entry is idle since its latest change).
fn merged_state(a: (TaskState, u64), b: (TaskState, u64)) -> (TaskState, u64) {
    let rank = |s: TaskState| match s {
        TaskState::Running => 2,
        TaskState::Scheduled => 1,
        TaskState::Idle => 0,
    };
    match rank(a.0).cmp(&rank(b.0)) {
        std::cmp::Ordering::Greater => a,
        std::cmp::Ordering::Less => b,
        std::cmp::Ordering::Equal if a.0 == TaskState::Idle => (a.0, a.1.min(b.1)),
        std::cmp::Ordering::Equal => (a.0, a.1.max(b.1)),
    }
}

/// Adds root `b` to the entry `a` of its tokio task, as the next branch
/// (see [`TaskInfo::branches`] for how the fields merge).
fn merge_branch(a: &mut TaskInfo, b: &TaskInfo) {
    a.branches.push(b.id);
    (a.state, a.state_ms) = merged_state((a.state, a.state_ms), (b.state, b.state_ms));
    a.polls = a.polls.max(b.polls);
    a.wakes = a.wakes.saturating_add(b.wakes);
    if a.name.is_none() {
        a.name.clone_from(&b.name);
    }
    if a.parent.is_none() {
        a.parent = b.parent;
    }
    if a.spawned_at.is_none() {
        a.spawned_at.clone_from(&b.spawned_at);
    }
    if a.root.is_none() {
        a.root.clone_from(&b.root);
    }
    a.frames.extend_from_slice(&b.frames);
    a.waits.extend_from_slice(&b.waits);
    a.hidden_frames = a.hidden_frames.saturating_add(b.hidden_frames);
    a.stack_unavailable |= b.stack_unavailable;
}

/// A dump of the live entries that `keep` selects (see
/// [`for_each_entry`]), sorted by id.
pub(super) fn dump_where(keep: impl FnMut(&TaskStatus) -> bool) -> TaskDump {
    // Room for every record ever used, the most tasks that can be live, so
    // the (large) task list is never regrown and copied. Counting reads no
    // record; the reservation is a fraction of the memory the records
    // themselves hold.
    let mut tasks = Vec::with_capacity(registry::record_count());
    // Each entry is taken whole, and the next one read into a fresh task:
    // its frames are collected straight into a vector of the right size.
    // Every root at once: the dump holds every task anyway.
    let summary = for_each_entry(
        keep,
        |task| tasks.push(std::mem::replace(task, scratch_task())),
        usize::MAX,
    );
    // Ids are unique, so an unstable sort gives the same order, without a
    // scratch buffer; slots read in index order are often in id order
    // already.
    if !tasks.is_sorted_by_key(|t| t.id) {
        tasks.sort_unstable_by_key(|t| t.id);
    }
    TaskDump {
        version: DUMP_FORMAT_VERSION,
        tasks,
        torn_copies: summary.torn_copies,
        untracked_roots: summary.untracked_roots,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_where_keeps_exactly_the_tasks_it_selects() {
        use crate::task::traced::TracedExt;
        use std::task::{Context, Waker};

        let mut a = Box::pin(std::future::pending::<()>().traced_named("where-a"));
        let mut b = Box::pin(std::future::pending::<()>().traced_named("where-b"));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(a.as_mut().poll(&mut cx).is_pending());
        assert!(b.as_mut().poll(&mut cx).is_pending());
        let (ia, ib) = (a.task_id().unwrap(), b.task_id().unwrap());
        let ours = |id: u64| id == ia || id == ib;

        let one = dump_where(|s| s.id == ia);
        assert_eq!(one.tasks.len(), 1);
        let task = &one.tasks[0];
        assert_eq!((task.id, task.name.as_deref()), (ia, Some("where-a")));
        assert_eq!(task.frames.len(), 1);
        assert_eq!(task.frames[0].function, "where-a");

        let running = dump_where(|s| ours(s.id) && s.state == TaskState::Running);
        assert!(running.tasks.is_empty());
        let idle = dump_where(|s| ours(s.id) && s.state == TaskState::Idle);
        let ids: Vec<u64> = idle.tasks.iter().map(|t| t.id).collect();
        assert_eq!(ids, [ia, ib]);
    }

    /// Each task is read afresh into the one scratch task: a name is never
    /// left over from the task before (named, unnamed, named), and what is
    /// handed over is what a whole dump holds.
    #[test]
    fn for_each_task_reads_each_task_afresh_into_one_scratch() {
        use crate::task::traced::TracedExt;
        use std::task::{Context, Waker};

        let mut a = Box::pin(std::future::pending::<()>().traced_named("each-a"));
        let mut b = Box::pin(std::future::pending::<()>().traced());
        let mut c = Box::pin(std::future::pending::<()>().traced_named("each-c"));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(a.as_mut().poll(&mut cx).is_pending());
        assert!(b.as_mut().poll(&mut cx).is_pending());
        assert!(c.as_mut().poll(&mut cx).is_pending());
        let ids = [a.task_id(), b.task_id(), c.task_id()].map(Option::unwrap);

        let mut seen = Vec::new();
        let summary = for_each_entry(
            |s| ids.contains(&s.id),
            |t| seen.push(t.clone()),
            FILED_BATCH,
        );
        assert_eq!(summary.tasks, 3);
        seen.sort_by_key(|t| t.id);
        let names: Vec<Option<&str>> = seen.iter().map(|t| t.name.as_deref()).collect();
        assert_eq!(names, [Some("each-a"), None, Some("each-c")]);
        let mut whole = dump_where(|s| ids.contains(&s.id)).tasks;
        // Read at two instants: times may differ by a tick of the clock.
        for t in seen.iter_mut().chain(&mut whole) {
            t.state_ms = 0;
        }
        assert_eq!(seen, whole);
    }
}
