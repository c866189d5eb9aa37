//! Collection: reads every live task's record into the dump model.
//!
//! Each task record is copied under its sequence counter (see
//! [`crate::task`]); interned site ids are resolved through one snapshot of
//! the site tables per dump, so that resolving an id is an index, not a
//! lock.

use std::borrow::Cow;

use super::{DUMP_FORMAT_VERSION, DumpFrame, SourceLocation, TaskDump, TaskInfo};
use crate::record::site::{AwaitSite, CallSite, await_site_by_id, call_site_by_id};
use crate::task::TaskState;
use crate::task::record::RawTask;
use crate::task::registry;
use crate::task::stack::{CopiedFrame, StackCopy, word};

impl TaskInfo {
    fn from_raw(raw: RawTask, copy: &StackCopy, sites: &Sites, now_ms: u64) -> TaskInfo {
        let copied: &[CopiedFrame] = if raw.stack_copied { &copy.frames } else { &[] };
        // The copy is already a tree in source order. One loop with one
        // closure, collected from an exact-size iterator, so that each
        // frame is written in place; see `dump_frame`.
        let frames = copied.iter().map(|f| dump_frame(f, sites)).collect();
        let (root_call, _) = sites.resolve(raw.root_site);
        TaskInfo {
            id: raw.id,
            // A spawn helper's name, or else the root's explicit one
            // (`#[traced_async(name = ..)]`, `.traced_named(..)`), which the
            // record does not copy per task.
            name: raw.name.map(|n| n.to_string()).or_else(|| {
                root_call
                    .filter(|c| c.explicit_name() && !c.is_anonymous())
                    .map(|c| c.name().to_owned())
            }),
            state: raw.state,
            state_ms: now_ms.saturating_sub(raw.since_ms),
            polls: raw.polls,
            wakes: raw.wakes,
            parent: (raw.parent != 0).then_some(raw.parent),
            spawned_at: raw
                .location
                .map(|l| location(l.file(), l.line(), l.column())),
            root: (raw.root_site != 0).then(|| function_of(root_call)),
            frames,
            hidden_frames: if raw.stack_copied { copy.hidden } else { 0 },
            stack_unavailable: !raw.stack_copied,
        }
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
        defined_at: call.map(|c| location(c.file(), c.line(), c.column())),
        awaiting_at: awaiting.map(|a| location(a.file(), a.line(), a.column())),
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
        if site & word::AWAIT != 0 {
            let at = self.await_site(site & !word::AWAIT);
            (at.map(AwaitSite::call_site), at)
        } else {
            (self.call(site), None)
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

/// A `'static` source location.
#[inline]
fn location(file: &'static str, line: u32, column: u32) -> SourceLocation {
    SourceLocation {
        file: Cow::Borrowed(file),
        line,
        column,
    }
}

/// A dump of the live tasks that `keep` selects by id, state and time in
/// that state (ms), which it sees before anything else of a task is read:
/// a task it skips costs two loads, not a copy of its stack. For the stall
/// watchdog, which looks for the few stalled tasks among many, and the
/// panic hook, which looks for one.
pub(crate) fn dump_where(keep: impl Fn(u64, TaskState, u64) -> bool) -> TaskDump {
    let now_ms = crate::record::clock::system_ms();
    // Room for every record ever used, the most tasks that can be live, so
    // the (large) task list is never regrown and copied. Counting reads no
    // record; the reservation is a fraction of the memory the records
    // themselves hold.
    let mut tasks = Vec::with_capacity(registry::record_count());
    let mut torn = 0u64;
    let mut copy = StackCopy::default();
    let sites = Sites::new();
    registry::for_each_record(|record| {
        let Some((id, state, since_ms)) = record.peek(now_ms) else {
            return;
        };
        if !keep(id, state, now_ms.saturating_sub(since_ms)) {
            return;
        }
        if let Some(raw) = record.read(&mut copy, now_ms) {
            torn += u64::from(raw.torn);
            tasks.push(TaskInfo::from_raw(raw, &copy, &sites, now_ms));
        }
    });
    // Ids are unique, so an unstable sort gives the same order, without a
    // scratch buffer; slots read in index order are often in id order
    // already.
    if !tasks.is_sorted_by_key(|t| t.id) {
        tasks.sort_unstable_by_key(|t| t.id);
    }
    TaskDump {
        version: DUMP_FORMAT_VERSION,
        tasks,
        torn_copies: torn,
        untracked_roots: registry::untracked(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_where_keeps_exactly_the_tasks_it_selects() {
        use crate::TracedExt;
        use std::task::{Context, Waker};

        let mut a = Box::pin(std::future::pending::<()>().traced_named("where-a"));
        let mut b = Box::pin(std::future::pending::<()>().traced_named("where-b"));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(a.as_mut().poll(&mut cx).is_pending());
        assert!(b.as_mut().poll(&mut cx).is_pending());
        let (ia, ib) = (a.task_id().unwrap(), b.task_id().unwrap());
        let ours = |id: u64| id == ia || id == ib;

        let one = dump_where(|id, _, _| id == ia);
        assert_eq!(one.tasks.len(), 1);
        let task = &one.tasks[0];
        assert_eq!((task.id, task.name.as_deref()), (ia, Some("where-a")));
        assert_eq!(task.frames.len(), 1);
        assert_eq!(task.frames[0].function, "where-a");

        let running = dump_where(|id, state, _| ours(id) && state == TaskState::Running);
        assert!(running.tasks.is_empty());
        let idle = dump_where(|id, state, _| ours(id) && state == TaskState::Idle);
        let ids: Vec<u64> = idle.tasks.iter().map(|t| t.id).collect();
        assert_eq!(ids, [ia, ib]);
    }
}
