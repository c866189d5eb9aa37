//! The **read protocol**: how a reader on another thread copies one
//! instant of a record (see [`crate::task::record`], "Reading a record").

use std::sync::Arc;

use crate::record::current;
use crate::shim::{Ordering, fence};
use crate::task::TaskState;
use crate::task::record::layout::{TaskRecord, spawn, state, wakes};
use crate::task::record::names::TaskName;
use crate::task::registry;
use crate::task::stack::reader::{StackCopy, Torn};
use crate::task::stack::words::{foreign, word};
use crate::task::tokio_task::TokioTask;

/// A validated copy of one live task's record.
#[derive(Debug, Clone)]
pub(crate) struct RawTask {
    pub(crate) id: u64,
    pub(crate) parent: u64,
    pub(crate) location: Option<&'static crate::record::site::CallSite>,
    /// The site field of the root's word (see [`crate::task::stack::word`]).
    pub(crate) root_site: u32,
    pub(crate) state: TaskState,
    pub(crate) since_ms: u64,
    pub(crate) polls: u64,
    pub(crate) wakes: u64,
    pub(crate) name: Option<Arc<TaskName>>,
    /// The tokio task the root is filed under (see
    /// [`crate::task::tokio_task`]).
    pub(crate) tokio: Option<TokioTask>,
    /// Whether the published stack was copied (into the caller's buffer);
    /// `false` if every copy attempt was torn.
    pub(crate) stack_copied: bool,
    /// Copies of the stack that were torn and retried.
    pub(crate) torn: u32,
}

/// How long (spin-loop hints) a reader waits for a section in progress
/// to end before an attempt at copying a record.
const SECTION_SPINS: u32 = if cfg!(async_stack_loom) { 0 } else { 512 };

/// How many times a dump ([`TaskRecord::read`]) tries to copy a record
/// that a writer keeps tearing before giving up on its stack (the task is
/// still reported, without frames). The sampler, which reads every task
/// at every tick, passes its own bound.
pub(crate) const DUMP_READ_TRIES: u32 = if cfg!(async_stack_loom) { 2 } else { 16 };

/// The state a reader reports, and since when (ms), from the `state` and
/// `wakes` words: idle becomes scheduled once woken since the last poll
/// started.
fn reported_state(st: u64, w: u64, now_ms: u64) -> (TaskState, u64) {
    let (kind, seen, since) = state::unpack(st);
    match kind {
        state::RUNNING => (TaskState::Running, since),
        state::SCHEDULED => (TaskState::Scheduled, since),
        _ if wakes::count(w) & state::SEEN_MASK != seen => {
            let woken = wakes::woken_ms(wakes::woken_low(w), now_ms);
            (TaskState::Scheduled, woken.max(since))
        }
        _ => (TaskState::Idle, since),
    }
}

impl TaskRecord {
    /// The id, state and state timestamp (ms) of the task in this record,
    /// if any: a few loads, for deciding whether to [`read`](Self::read)
    /// it. Not validated: the task may end or change state right after.
    pub(crate) fn peek(&self, now_ms: u64) -> Option<(u64, TaskState, u64)> {
        let id = self.id.load(Ordering::Acquire);
        if id == 0 {
            return None;
        }
        let st = self.state.load(Ordering::Acquire);
        let w = self.wakes.load(Ordering::Relaxed);
        let (state, since) = reported_state(st, w, now_ms);
        Some((id, state, since))
    }

    /// Whether the task in this record was registered at its spawn and
    /// its root has not been polled yet (see `root::preregister`): never
    /// polled, no root in slot 0. Not validated.
    #[inline]
    pub(crate) fn not_started(&self) -> bool {
        self.polls.load(Ordering::Relaxed) == 0 && self.slots[0].load(Ordering::Relaxed) == 0
    }

    /// The id of the task in this record if, at one instant, it was idle,
    /// not woken since its last poll, and without a waker anywhere: `refs`
    /// counted only the live task, and it has no fallback waker (whose
    /// clones `refs` does not count). Its poll count, state and wake words
    /// are read before and after the count, unchanged. Such a task can
    /// never be woken again.
    pub(crate) fn lost_waker(&self) -> Option<u64> {
        let id = self.id.load(Ordering::Acquire);
        if id == 0 {
            return None;
        }
        let p1 = self.polls.load(Ordering::Acquire);
        let st = self.state.load(Ordering::Acquire);
        let w = self.wakes.load(Ordering::Acquire);
        if reported_state(st, w, 0).0 != TaskState::Idle {
            return None;
        }
        let refs = self.refs.load(Ordering::Acquire);
        let fallback = self.spawn.load(Ordering::Relaxed) & spawn::FALLBACK != 0;
        fence(Ordering::Acquire);
        let unchanged = self.polls.load(Ordering::Relaxed) == p1
            && self.state.load(Ordering::Relaxed) == st
            && self.wakes.load(Ordering::Relaxed) == w
            && self.id.load(Ordering::Relaxed) == id;
        (unchanged && refs == 1 && !fallback).then_some(id)
    }

    /// Copies this record, if it holds a live task, as one instant (see
    /// the module docs); its stack goes into `copy`. Never blocks: no lock,
    /// no waiting for a running poll. `None` for a free record or a task
    /// that ended while being read.
    pub(crate) fn read(&self, index: u32, copy: &mut StackCopy, now_ms: u64) -> Option<RawTask> {
        self.read_tries(index, copy, now_ms, DUMP_READ_TRIES)
    }

    /// [`read`](Self::read), with up to `tries` copy attempts. Before
    /// each, a short bounded spin lets a section in progress (an odd
    /// `seq`) end, so that attempts are not spent on a writer that is
    /// known to be inside one.
    pub(crate) fn read_tries(
        &self,
        index: u32,
        copy: &mut StackCopy,
        now_ms: u64,
        tries: u32,
    ) -> Option<RawTask> {
        self.read_tries_with(index, copy, now_ms, tries, |_, _| true)
    }

    /// [`read_tries`](Self::read_tries), reading what the task was spawned
    /// with (parent, spawn location, name, tokio task) only if `want_ext(id,
    /// root_site)` says so; otherwise they are `0` and `None`. These do
    /// not change while a task lives (they are written before its id is
    /// published and cleared after the id is), so a reader that already
    /// knows them for this id and root can skip them: the sampler's steady
    /// path, which thereby takes no reference to the name. Inlined, so
    /// that the copy is not returned through memory (a sampler reads
    /// thousands of records per tick). `index` is the record's index,
    /// which finds the task's name (see
    /// [`TaskExt`](crate::task::record::TaskExt)).
    #[inline]
    // Loom models spin 0 times: the loop's bound is then always false.
    #[cfg_attr(async_stack_loom, allow(clippy::absurd_extreme_comparisons))]
    pub(crate) fn read_tries_with(
        &self,
        index: u32,
        copy: &mut StackCopy,
        now_ms: u64,
        tries: u32,
        want_ext: impl FnOnce(u64, u32) -> bool,
    ) -> Option<RawTask> {
        let id = self.id.load(Ordering::Acquire);
        if id == 0 {
            return None;
        }
        let mut torn = 0;
        let mut header = None;
        while torn < tries {
            let mut spins = 0;
            while self.seq.load(Ordering::Relaxed) & 1 == 1 && spins < SECTION_SPINS {
                std::hint::spin_loop();
                spins += 1;
            }
            match self.copy_once(copy) {
                Ok(h) => {
                    header = Some((h, true));
                    break;
                }
                Err(_) => {
                    torn += 1;
                    std::hint::spin_loop();
                }
            }
        }
        // A stack that kept changing: the header alone, still from one
        // instant of the poll counters.
        let (h, stack_copied) = match header {
            Some(h) => h,
            None => (self.header_once()?, false),
        };
        let (parent, location, name, tokio) = if want_ext(id, h.root_site) {
            (
                self.parent.load(Ordering::Relaxed),
                self.location(),
                self.name(index),
                self.tokio_task(index),
            )
        } else {
            (0, None, None, None)
        };
        // If the record changed hands while we read, every field above may
        // belong to another task.
        fence(Ordering::Acquire);
        if self.id.load(Ordering::Relaxed) != id {
            return None;
        }
        let (state, since_ms) = reported_state(h.state, h.wakes, now_ms);
        Some(RawTask {
            id,
            parent,
            location,
            root_site: h.root_site,
            state,
            since_ms,
            polls: h.polls,
            wakes: wakes::count(h.wakes).wrapping_add(h.self_wakes),
            name,
            tokio,
            stack_copied,
            torn,
        })
    }

    /// One attempt at copying the record: the header and the stack
    /// between two loads of every counter that a change would move.
    fn copy_once(&self, copy: &mut StackCopy) -> Result<Header, Torn> {
        let s1 = self.seq.load(Ordering::Acquire);
        let f1 = self.foreign.load(Ordering::Acquire);
        if s1 & 1 == 1 || foreign::open(f1) != 0 {
            return Err(Torn);
        }
        // The poll count first: a poll that starts after this load moves
        // it (see `start_poll`); then the state, with acquire ordering, so
        // that an idle state written at a poll's end comes with that poll's
        // cleared `current`. Two polls can end in the same idle word (same
        // millisecond, no wake): only the count tells them apart.
        let p1 = self.polls.load(Ordering::Acquire);
        let st1 = self.state.load(Ordering::Acquire);
        let running = self.current.load(Ordering::Relaxed);
        let wakes = self.wakes.load(Ordering::Relaxed);
        let self_wakes = self.self_wakes.load(Ordering::Relaxed);
        self.copy_raw(copy)?;
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        let f2 = self.foreign.load(Ordering::Relaxed);
        let st2 = self.state.load(Ordering::Relaxed);
        let p2 = self.polls.load(Ordering::Relaxed);
        if s1 != s2 || f1 != f2 || st1 != st2 || p1 != p2 {
            return Err(Torn);
        }
        copy.build(current::current_slot(running), f1);
        Ok(Header {
            state: st1,
            polls: p1,
            wakes,
            self_wakes,
            root_site: copy.raw.first().map_or(0, |&w| word::site(w)),
        })
    }

    /// The header alone, from one instant of the poll counters.
    fn header_once(&self) -> Option<Header> {
        for _ in 0..DUMP_READ_TRIES {
            let p1 = self.polls.load(Ordering::Acquire);
            let st1 = self.state.load(Ordering::Acquire);
            let wakes = self.wakes.load(Ordering::Relaxed);
            let self_wakes = self.self_wakes.load(Ordering::Relaxed);
            let root = self.slots[0].load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.state.load(Ordering::Relaxed) == st1 && self.polls.load(Ordering::Relaxed) == p1
            {
                return Some(Header {
                    state: st1,
                    polls: p1,
                    wakes,
                    self_wakes,
                    root_site: word::site(root),
                });
            }
        }
        None
    }
}

/// The header fields of one copy.
struct Header {
    state: u64,
    polls: u64,
    wakes: u64,
    self_wakes: u64,
    root_site: u32,
}

impl TaskRecord {
    /// The name of the task in this record (index `index`), if it has one.
    /// Not validated: the caller checks the id afterwards.
    pub(crate) fn name(&self, index: u32) -> Option<Arc<TaskName>> {
        if !spawn::named(self.spawn.load(Ordering::Acquire)) {
            return None;
        }
        registry::ext(index)?.name.load()
    }

    /// The tokio task the root in this record (index `index`) is filed
    /// under, if any. Not validated: the caller checks the id afterwards.
    pub(crate) fn tokio_task(&self, index: u32) -> Option<TokioTask> {
        if !spawn::in_tokio(self.spawn.load(Ordering::Acquire)) {
            return None;
        }
        Some(TokioTask {
            id: registry::tokio_id(index)?.load(Ordering::Relaxed),
            // Ids order the roots filed under tokio tasks by first poll.
            order: self.id.load(Ordering::Relaxed),
        })
    }
}
