//! Collection: reads every live task's record into the dump model.
//!
//! Each task record is copied under its sequence counter (see
//! [`crate::task`]); interned site ids are resolved through one snapshot of
//! the site tables per dump, so that resolving an id is an index, not a
//! lock.

use std::borrow::Cow;

use super::{DUMP_FORMAT_VERSION, DumpFrame, SourceLocation, TaskDump, TaskInfo};
use crate::record::site::{AwaitSite, CallSite, await_site_by_id, call_site_by_id};
use crate::task::published::{Entry, StackCopy};
use crate::task::registry::RawTask;
use crate::task::{TaskState, registry};

impl TaskInfo {
    fn from_raw(raw: RawTask, copy: &StackCopy, sites: &Sites, now_ms: u64) -> TaskInfo {
        let (words, len) = if raw.stack_copied {
            (&copy.words[..], copy.len)
        } else {
            (&[][..], 0)
        };
        let running = if raw.stack_copied {
            copy.running_mask()
        } else {
            0
        };
        let innermost_running = copy.active.filter(|_| raw.stack_copied).map(|a| a as usize);
        // The copy is already a tree in source order. One loop with one
        // closure, collected from a range (exact length, no growth check
        // per frame), so that each frame is written in place; see
        // `dump_frame`.
        let frames = (0..words.len())
            .map(|i| dump_frame(words, i, sites, innermost_running, running))
            .collect();
        TaskInfo {
            id: raw.id,
            // A spawn helper's name, or else the root's explicit one
            // (`#[traced_async(name = ..)]`, `.traced_named(..)`), which the
            // registry does not copy per task.
            name: raw.name.map(|n| n.to_string()).or_else(|| {
                sites
                    .call(raw.root_call_site)
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
            root: (raw.root_call_site != 0).then(|| function_of(sites.call(raw.root_call_site))),
            frames,
            hidden_frames: len.saturating_sub(words.len() as u32),
            stack_unavailable: !raw.stack_copied,
        }
    }
}

/// The frame of entry `i` of a copied stack. `running` has bit `i` set for
/// each entry inside its poll, and `innermost_running` is the one being
/// polled now (it has no `.await` yet).
///
/// Always inlined into the loop that pushes the frame: returned from a
/// call, the 96-byte frame goes through the stack, and copying it into the
/// vector stalls on the narrower stores that wrote it (store forwarding
/// fails), which made up a third of a dump's time.
#[inline(always)]
fn dump_frame(
    words: &[u64],
    i: usize,
    sites: &Sites,
    innermost_running: Option<usize>,
    running: u64,
) -> DumpFrame {
    let e = Entry::decode(words[i]);
    let call = sites.call(e.call_site);
    let awaiting = if Some(i) == innermost_running {
        None
    } else {
        sites.await_site(e.await_site)
    };
    DumpFrame {
        depth: e.depth,
        function: function_of(call),
        defined_at: call.map(|c| location(c.file(), c.line(), c.column())),
        awaiting_at: awaiting.map(|a| location(a.file(), a.line(), a.column())),
        running: running & (1 << i) != 0,
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
    // Room for every slot ever used, the most tasks that can be live, so
    // the (large) task list is never regrown and copied. Counting reads no
    // slot, only the page table; the reservation is a fraction of the
    // memory the slots themselves hold.
    let mut slots = 0;
    registry().for_each_slot(|_| slots += 1);
    let mut tasks = Vec::with_capacity(slots);
    let mut torn = 0u64;
    let mut copy = StackCopy::default();
    let sites = Sites::new();
    registry().for_each_slot(|slot| {
        let Some((id, state, since_ms)) = slot.peek() else {
            return;
        };
        if !keep(id, state, now_ms.saturating_sub(since_ms)) {
            return;
        }
        if let Some(raw) = slot.read(&mut copy) {
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
        untracked_roots: registry().untracked(),
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
