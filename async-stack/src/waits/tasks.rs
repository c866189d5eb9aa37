//! The detector's view of tasks ([`TaskView`]), read from the task
//! registry: one pass over the records, without a lock.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::record::location::SourceLocation;
use crate::record::site::{SiteId, await_site_by_id};
use crate::shim::Ordering;
use crate::task::TaskState;
use crate::task::record::read::DUMP_READ_TRIES;
use crate::task::registry;
use crate::task::stack::reader::StackCopy;
use crate::waits::detect::{Interest, TaskView};
use crate::waits::waiter::suspended_in;

/// The live tasks at one pass.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    /// Record index, and the wake count of an idle task.
    tasks: HashMap<u64, (u32, Option<u64>)>,
    /// Live roots by tokio task id, in record order.
    roots: HashMap<u64, Vec<u64>>,
    /// Scratch for the stacks read, one at a time (no allocation a read
    /// once it has grown).
    scratch: RefCell<StackCopy>,
}

impl Tasks {
    /// Reads every record once, keeping the tasks of `interest` and the
    /// roots of its tokio tasks.
    pub(crate) fn read(interest: &Interest) -> Tasks {
        let now = crate::clock::now_ms();
        let mut out = Tasks::default();
        registry::for_each_record(|index, r| {
            let Some((id, state, _)) = r.peek(now) else {
                return;
            };
            let wanted = interest.tasks.contains(&id);
            if !wanted && interest.tokio.is_empty() {
                return;
            }
            let wakes = r.woken_count();
            let tokio = r
                .tokio_task(index)
                .filter(|t| interest.tokio.contains(&t.id));
            if (!wanted && tokio.is_none()) || r.id.load(Ordering::Acquire) != id {
                return;
            }
            let idle = (state == TaskState::Idle).then_some(wakes);
            out.tasks.insert(id, (index, idle));
            if let Some(t) = tokio {
                out.roots.entry(t.id).or_default().push(id);
            }
        });
        for roots in out.roots.values_mut() {
            roots.sort_unstable();
        }
        out
    }
}

impl TaskView for Tasks {
    fn idle(&self, task: u64) -> Option<u64> {
        self.tasks.get(&task)?.1
    }

    fn roots_of(&self, tokio_id: u64) -> Vec<u64> {
        self.roots.get(&tokio_id).cloned().unwrap_or_default()
    }

    fn name(&self, task: u64) -> Option<String> {
        let &(index, _) = self.tasks.get(&task)?;
        let r = registry::record(index)?;
        let name = r.name(index)?.as_str().to_owned();
        (r.id.load(Ordering::Acquire) == task).then_some(name)
    }

    /// The deepest shown frame's `.await` (the last of the deepest, in
    /// the order a dump lists frames: the frame a dump shows the wait
    /// under).
    fn awaiting_at(&self, task: u64) -> Option<SourceLocation> {
        let site = self.with_stack(task, |copy| {
            let (_, deepest) = copy
                .frames
                .iter()
                .enumerate()
                .max_by_key(|&(i, f)| (f.depth, i))?;
            let site = SiteId::from_raw(deepest.site);
            (!deepest.innermost && site.is_await()).then_some(site)
        })??;
        Some(await_site_by_id(site.id())?.location())
    }

    fn awaits_at(&self, task: u64, awaiting: u64, path: u64) -> bool {
        self.with_stack(task, |copy| suspended_in(awaiting, path, &copy.frames))
            .unwrap_or(false)
    }
}

impl Tasks {
    /// `f` of the live task's published stack, if it reads whole.
    fn with_stack<T>(&self, task: u64, f: impl FnOnce(&StackCopy) -> T) -> Option<T> {
        let &(index, _) = self.tasks.get(&task)?;
        let r = registry::record(index)?;
        let mut copy = self.scratch.borrow_mut();
        // Only the stack: not the name, parent or spawn site (no reference
        // to the name taken and dropped again).
        let raw = r.read_tries_with(
            index,
            &mut copy,
            crate::clock::now_ms(),
            DUMP_READ_TRIES,
            |_, _| false,
        )?;
        (raw.id == task && raw.stack_copied).then(|| f(&copy))
    }
}
