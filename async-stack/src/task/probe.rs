//! The **wake probes**: the one interface through which the task layer
//! lets a wake recorder know what happens to tasks, and the tables the
//! probes fill. The task root ([`crate::task::root`]) and its waker
//! ([`crate::task::waker`]) call the hooks below and nothing else of the
//! wake side; [`crate::wake`] reads the tables (its graph) and flips the
//! switch ([`start`], [`stop`]), so the task layer never imports it.
//!
//! # The interface
//!
//! - [`on`]: whether recording is on; the caller's whole cost when off.
//!   Every hook is called only after `on()` returned `true`, except
//!   [`init_from_env`], called once per registration on the cold path.
//! - the hooks, each `#[cold]`: [`poll_started`] and [`poll_ended`] (a
//!   tracked root's poll), [`task_ended`], [`woken`] (a wake from outside
//!   the task's own poll), [`cloned`] and [`dropped`] (its waker).
//! - the tables, for the wake graph: [`existing_wakes`], [`tasks`],
//!   [`edge_tables`], and [`clear`].
//!
//! # Cost
//!
//! Off (the default), each hook is one relaxed load of [`ON`] and a branch
//! not taken: on a root's poll entry and exit, on a wake, and on a waker
//! clone and drop. On, a poll reads the clock twice and updates its task's
//! [`TaskWakes`] (relaxed atomics on one cache line pair that the polling
//! thread mostly owns); a wake reads the clock once, stamps the woken
//! task's entry, and counts the edge in the waking thread's own edge table
//! (an uncontended mutex: only the wake graph takes it from another
//! thread).
//!
//! # Where data lives
//!
//! - **Per task**, a [`TaskWakes`] beside its registry record, in pages that are
//!   allocated on first use while recording and never freed (like the
//!   records, and with the same code: [`crate::pages`]). An entry belongs to the task whose id it holds: the first poll
//!   of a task while recording (re)initialises it, so a task spawned before
//!   recording started is counted from its next poll.
//! - **Per task, once**: its name, spawn site, root function and the tokio
//!   task it is filed under ([`TaskDetails`]), in a map under a mutex,
//!   written when the entry is initialised and again, with the final
//!   counters, when the task ends. (The tokio task is read there, from the
//!   record's extension, once per task: a poll reads nothing more than
//!   before.)
//!   Ended tasks are kept up to [`ENDED_LIMIT`]; beyond that the oldest are
//!   forgotten and counted (`dropped_tasks`), so recording a million short
//!   tasks does not grow without bound.
//! - **Per edge**, a count in the waking thread's table, keyed by (waking
//!   source, woken task id).
//!
//! Not built under loom (neither is the wake graph), so its atomics and
//! mutexes are `std`'s: the atomics are statistics, each field meaningful
//! on its own, that no protocol reads for a decision, and each mutex
//! guards a table for one insert or one copy; loom has nothing to check
//! in them.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::Duration;

use rustc_hash::FxHashMap;

use crate::pages;
use crate::record::current;
use crate::record::frame::AsyncStackFrame;
use crate::shim::lock;
use crate::task::record::TaskRecord;
use crate::task::registry;
use crate::task::tokio_task::TokioTask;

/// Whether recording is on.
pub(crate) static ON: AtomicBool = AtomicBool::new(false);

/// The slow-poll threshold until the wake graph's user changes it: 50 µs,
/// tokio-metrics' default.
pub(crate) const DEFAULT_SLOW_POLL: Duration = Duration::from_micros(50);

/// Polls longer than this are slow polls (nanoseconds).
pub(crate) static SLOW_POLL_NS: AtomicU64 = AtomicU64::new(DEFAULT_SLOW_POLL.as_nanos() as u64);

/// How many ended tasks the recording keeps.
pub(crate) const ENDED_LIMIT: usize = 100_000;

/// The environment variable that turns recording on at start-up.
pub(crate) const WAKES_VAR: &str = "ASYNC_STACK_WAKES";

/// The source of an edge that is not a task: the waking thread polls tasks
/// but was outside any task's poll (a runtime's I/O or timer driver, or
/// code around `block_on`).
pub(crate) const SOURCE_RUNTIME: u64 = u64::MAX;
/// The source of an edge from a thread that never polled a task.
pub(crate) const SOURCE_THREAD: u64 = u64::MAX - 1;

/// Whether recording is on: one relaxed load, the whole cost when off.
#[inline(always)]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Who wants recording on: the program ([`start`] and [`stop`]), and the
/// sessions in progress ([`hold`]: a debug endpoint's timed recording).
/// [`ON`] is on while either does, so that a session ending never turns
/// off what the program turned on meanwhile, nor the program's `stop`
/// cut a session short. Changed under its lock (rarely: a few times per
/// run); the poll path reads only [`ON`].
struct Wanted {
    program: bool,
    sessions: usize,
}

static WANTED: Mutex<Wanted> = Mutex::new(Wanted {
    program: false,
    sessions: 0,
});

/// Applies `change` to [`WANTED`] and sets [`ON`] to match, the clock
/// built (and calibrated) before recording starts stamping.
fn want(change: impl FnOnce(&mut Wanted)) {
    let mut wanted = lock(&WANTED);
    change(&mut wanted);
    let on = wanted.program || wanted.sessions > 0;
    if on {
        let _ = now();
    }
    ON.store(on, Ordering::Relaxed);
}

/// The program turns recording on.
pub(crate) fn start() {
    want(|w| w.program = true);
}

/// The program turns recording off; what was recorded stays. Sessions in
/// progress keep it on until they end.
pub(crate) fn stop() {
    want(|w| w.program = false);
}

/// Keeps recording on until the returned guard is dropped, whatever the
/// program turns on or off meanwhile; then it is as the program left it.
pub(crate) fn hold() -> Holding {
    want(|w| w.sessions += 1);
    Holding(())
}

/// A session's hold on recording ([`hold`]).
#[derive(Debug)]
pub(crate) struct Holding(());

impl Drop for Holding {
    fn drop(&mut self) {
        want(|w| w.sessions -= 1);
    }
}

/// Reads `ASYNC_STACK_WAKES` once (on the first task registration).
#[cold]
pub(crate) fn init_from_env() {
    static ENV: Once = Once::new();
    ENV.call_once(|| {
        let value = std::env::var_os(WAKES_VAR);
        match wanted(value.as_deref()) {
            Ok(true) => start(),
            Ok(false) => {}
            Err(message) => crate::warn::warn(format_args!("{message}")),
        }
    });
}

/// What `ASYNC_STACK_WAKES` asks for: `Ok(true)` to record, `Ok(false)`
/// not to, `Err` naming a value it does not understand.
pub(crate) fn wanted(value: Option<&std::ffi::OsStr>) -> Result<bool, String> {
    let Some(value) = value else {
        return Ok(false);
    };
    let text = value.to_string_lossy();
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "" | "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(format!(
            "async-stack: {WAKES_VAR}={text:?} is not understood (use 1 or 0); wake recording stays off"
        )),
    }
}

// ---- the clock ----

/// The recording's clock: the processor's time-stamp counter where it is
/// usable (a few nanoseconds a read, where the system clock costs about
/// twenty in a virtual machine), scaled to nanoseconds only when two
/// stamps are subtracted; the monotonic system clock elsewhere. Built
/// (and calibrated, once per process) when recording is turned on.
fn clock() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// A stamp of the recording's clock; never 0 (0 means "unset" in an entry).
#[inline]
pub(crate) fn now() -> u64 {
    clock().raw().max(1)
}

/// Nanoseconds from stamp `from` to stamp `to` (0 if `to` is not later).
#[inline]
pub(crate) fn ns(from: u64, to: u64) -> u64 {
    clock().delta_as_nanos(from, to)
}

// ---- per-task entries ----

/// One task's counters. Written by the polling thread (poll fields) and by
/// wakers on any thread (wake fields), all with relaxed atomics: these are
/// statistics, and each field is meaningful on its own.
#[derive(Default)]
pub(crate) struct TaskWakes {
    /// The task this entry counts for (`0`: none).
    pub(crate) task: AtomicU64,
    pub(crate) polls: AtomicU64,
    pub(crate) wakes: AtomicU64,
    pub(crate) self_wakes: AtomicU64,
    pub(crate) clones: AtomicU64,
    pub(crate) drops: AtomicU64,
    pub(crate) slow_polls: AtomicU64,
    pub(crate) busy_ns: AtomicU64,
    pub(crate) scheduled_ns: AtomicU64,
    pub(crate) idle_ns: AtomicU64,
    /// When the current poll started (`0`: not in a poll).
    pub(crate) poll_start: AtomicU64,
    /// When the task last returned `Pending` without having been woken
    /// (`0`: not idle, or idle time already accounted).
    pub(crate) pending_since: AtomicU64,
    /// When the task was first woken since its last poll started (`0`:
    /// not woken).
    pub(crate) woken_at: AtomicU64,
    /// `1` while the task is flagged for a lost waker.
    pub(crate) lost: AtomicU64,
}

const WAKES_PAGE: usize = 1024;
const WAKES_PAGES: usize = (1 << crate::task::place::RECORD_BITS) / WAKES_PAGE;

/// The side table's page table ([`crate::pages`]): indexed by record
/// index, so it hands out no indices of its own (no [`pages::Arena`]).
static PAGES: [AtomicPtr<TaskWakes>; WAKES_PAGES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; WAKES_PAGES];

/// The entry of record `index`, allocating its page on first use.
#[inline]
pub(crate) fn wakes_of(index: u32) -> Option<&'static TaskWakes> {
    pages::get_or_make(&PAGES, WAKES_PAGE, index as usize, TaskWakes::default)
}

/// The entry of record `index` if its page exists (readers never allocate).
pub(crate) fn existing_wakes(index: u32) -> Option<&'static TaskWakes> {
    pages::get(&PAGES, WAKES_PAGE, index as usize)
}

/// Adds `n` to a field that only the thread polling the task writes (a
/// task is polled by one thread at a time, and the executor orders its
/// polls): a load and a store, no read-modify-write.
fn bump(field: &AtomicU64, n: u64) {
    field.store(
        field.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Adds `n` to a field that wakers on any thread write.
fn add(field: &AtomicU64, n: u64) {
    field.fetch_add(n, Ordering::Relaxed);
}

// ---- what a task is ----

/// What the graph says of a task besides its counters.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskDetails {
    pub(crate) name: Option<String>,
    pub(crate) spawn_site: Option<String>,
    pub(crate) root: Option<String>,
    /// The tokio task its root was first polled in, if any (see
    /// [`crate::task::tokio_task`]): the wake graph merges the roots of
    /// one tokio task into one node.
    pub(crate) tokio: Option<TokioTask>,
    /// Final counters, once the task ended.
    pub(crate) ended: Option<Counters>,
}

/// A copy of an entry's counters.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) polls: u64,
    pub(crate) wakes: u64,
    pub(crate) self_wakes: u64,
    pub(crate) clones: u64,
    pub(crate) drops: u64,
    pub(crate) slow_polls: u64,
    pub(crate) busy_ns: u64,
    pub(crate) scheduled_ns: u64,
    pub(crate) idle_ns: u64,
    pub(crate) lost: bool,
}

impl TaskWakes {
    /// The counters now; an idle task's current idle stretch counts up to
    /// `now`.
    pub(crate) fn counters(&self, now: u64) -> Counters {
        let get = |f: &AtomicU64| f.load(Ordering::Relaxed);
        let mut idle = get(&self.idle_ns);
        let pending = get(&self.pending_since);
        if pending != 0 {
            let woken = get(&self.woken_at);
            idle += if woken != 0 {
                ns(pending, woken)
            } else {
                ns(pending, now)
            };
        }
        Counters {
            polls: get(&self.polls),
            wakes: get(&self.wakes),
            self_wakes: get(&self.self_wakes),
            clones: get(&self.clones),
            drops: get(&self.drops),
            slow_polls: get(&self.slow_polls),
            busy_ns: get(&self.busy_ns),
            scheduled_ns: get(&self.scheduled_ns),
            idle_ns: idle,
            lost: get(&self.lost) != 0,
        }
    }

    fn reset(&self, task: u64) {
        for f in [
            &self.polls,
            &self.wakes,
            &self.self_wakes,
            &self.clones,
            &self.drops,
            &self.slow_polls,
            &self.busy_ns,
            &self.scheduled_ns,
            &self.idle_ns,
            &self.poll_start,
            &self.pending_since,
            &self.woken_at,
            &self.lost,
        ] {
            f.store(0, Ordering::Relaxed);
        }
        self.task.store(task, Ordering::Release);
    }
}

/// Tasks seen while recording, live and ended.
#[derive(Default)]
pub(crate) struct Tasks {
    pub(crate) meta: FxHashMap<u64, TaskDetails>,
    /// Ended task ids, oldest first, for the [`ENDED_LIMIT`] cap.
    pub(crate) ended: VecDeque<u64>,
    pub(crate) dropped: u64,
}

pub(crate) fn tasks() -> &'static Mutex<Tasks> {
    static TASKS: OnceLock<Mutex<Tasks>> = OnceLock::new();
    TASKS.get_or_init(Mutex::default)
}

/// The first poll of task `id` (record `r` at `index`, root `root`) while
/// recording: resets its entry and notes what the task is. Runs on the
/// task's polling thread, after its registration wrote the record's
/// `spawn` word and extension, so what they say is the task's.
#[cold]
#[inline(never)]
fn adopt(entry: &TaskWakes, index: u32, r: &TaskRecord, id: u64, root: &AsyncStackFrame) {
    entry.reset(id);
    let name = r.name(index).map(|n| n.as_str().to_owned());
    let spawn_site = r
        .location()
        .map(|s| format!("{}:{}:{}", s.file(), s.line(), s.column()));
    let root = Some(root.call_site().function());
    let tokio = r.tokio_task(index);
    lock(tasks()).meta.insert(
        id,
        TaskDetails {
            name,
            spawn_site,
            root,
            tokio,
            ended: None,
        },
    );
}

// ---- hooks ----

/// A tracked root's poll starts (recording on).
#[cold]
#[inline(never)]
pub(crate) fn poll_started(index: u32, r: &TaskRecord, root: &AsyncStackFrame) {
    let id = r.id.load(Ordering::Relaxed);
    let Some(entry) = wakes_of(index) else { return };
    if entry.task.load(Ordering::Relaxed) != id {
        adopt(entry, index, r, id, root);
    }
    let now = now();
    bump(&entry.polls, 1);
    entry.poll_start.store(now, Ordering::Relaxed);
    entry.lost.store(0, Ordering::Relaxed);
    // Wakers stamp `woken_at` from any thread: take it with a swap, or
    // just a load when it is unset (a wake stamped after that load belongs
    // to this poll, and the next poll takes it).
    let woken = match entry.woken_at.load(Ordering::Relaxed) {
        0 => 0,
        _ => entry.woken_at.swap(0, Ordering::Relaxed),
    };
    // Only this thread writes `pending_since` (wakers read it).
    let pending = entry.pending_since.load(Ordering::Relaxed);
    if pending != 0 {
        entry.pending_since.store(0, Ordering::Relaxed);
    }
    if pending != 0 {
        // Idle from `Pending` to the wake (or to this poll, if the executor
        // polled without one). A wake stamped before the `Pending` was (a
        // wake that raced the end of the poll) means no idle time.
        let until = if woken != 0 { woken } else { now };
        bump(&entry.idle_ns, ns(pending, until));
    }
    if woken != 0 {
        bump(&entry.scheduled_ns, ns(woken, now));
    }
}

/// A tracked root's poll ends (recording on): `pending`, and whether it
/// was woken during the poll (`woken`: by itself `self_wakes` times, or by
/// another thread).
#[cold]
#[inline(never)]
pub(crate) fn poll_ended(index: u32, r: &TaskRecord, pending: bool, self_wakes: u32, woken: bool) {
    let Some(entry) = existing_wakes(index) else {
        return;
    };
    if entry.task.load(Ordering::Relaxed) != r.id.load(Ordering::Relaxed) {
        return;
    }
    let now = now();
    let start = entry.poll_start.load(Ordering::Relaxed);
    entry.poll_start.store(0, Ordering::Relaxed);
    if start != 0 {
        let busy = ns(start, now);
        bump(&entry.busy_ns, busy);
        if busy > SLOW_POLL_NS.load(Ordering::Relaxed) {
            bump(&entry.slow_polls, 1);
        }
    }
    if self_wakes != 0 {
        bump(&entry.self_wakes, u64::from(self_wakes));
        let _ = entry
            .woken_at
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    }
    if !pending || woken || self_wakes != 0 {
        return;
    }
    entry.pending_since.store(now, Ordering::Relaxed);
    // Pending, not woken, and no clone of its waker left (the task's own
    // reference is the only one): nothing can wake it.
    if r.refs.load(Ordering::Acquire) == 1 && entry.woken_at.load(Ordering::Relaxed) == 0 {
        entry.lost.store(1, Ordering::Relaxed);
    }
}

/// The task of record `index` (whose entry counts task `id`) ends.
#[cold]
pub(crate) fn task_ended(index: u32, id: u64) {
    let Some(entry) = existing_wakes(index) else {
        return;
    };
    if id == 0 || entry.task.load(Ordering::Relaxed) != id {
        return;
    }
    let counters = entry.counters(now());
    // An ended task is not waiting for anything.
    let counters = Counters {
        lost: false,
        ..counters
    };
    entry.task.store(0, Ordering::Relaxed);
    let mut t = lock(tasks());
    if let Some(meta) = t.meta.get_mut(&id) {
        meta.ended = Some(counters);
        t.ended.push_back(id);
    }
    while t.ended.len() > ENDED_LIMIT {
        if let Some(old) = t.ended.pop_front() {
            t.meta.remove(&old);
            t.dropped += 1;
        }
    }
}

/// A wake of the task of record `index` (`r`) from outside its own poll.
#[cold]
#[inline(never)]
pub(crate) fn woken(index: u32, r: &TaskRecord) {
    let to = r.id.load(Ordering::Relaxed);
    let Some(entry) = existing_wakes(index) else {
        return;
    };
    if to == 0 || entry.task.load(Ordering::Relaxed) != to {
        // Not polled since recording started: nothing to attribute yet.
        return;
    }
    add(&entry.wakes, 1);
    // Only the first wake since the last poll started is stamped (reads
    // the clock).
    if entry.woken_at.load(Ordering::Relaxed) == 0 {
        let _ = entry
            .woken_at
            .compare_exchange(0, now(), Ordering::Relaxed, Ordering::Relaxed);
    }
    let from = current::with(|a| match TaskRecord::running(a) {
        Some(waker) => waker.id.load(Ordering::Relaxed),
        None if a.polled_tasks() => SOURCE_RUNTIME,
        None => SOURCE_THREAD,
    })
    .unwrap_or(SOURCE_THREAD);
    count_edge(from, to);
}

/// A clone of the task's waker (recording on).
#[cold]
#[inline(never)]
pub(crate) fn cloned(index: u32) {
    if let Some(entry) = existing_wakes(index) {
        add(&entry.clones, 1);
    }
}

/// A clone of the task's waker was dropped (recording on), leaving
/// `refs_left` references to record `index`, one of them the live task's.
#[cold]
#[inline(never)]
pub(crate) fn dropped(index: u32, refs_left: u32) {
    let Some(entry) = existing_wakes(index) else {
        return;
    };
    add(&entry.drops, 1);
    if refs_left == 1
        && entry.pending_since.load(Ordering::Relaxed) != 0
        && entry.woken_at.load(Ordering::Relaxed) == 0
        && entry.poll_start.load(Ordering::Relaxed) == 0
        && registry::record(index).is_some_and(|r| r.id.load(Ordering::Relaxed) != 0)
    {
        entry.lost.store(1, Ordering::Relaxed);
    }
}

// ---- edges ----

/// One thread's edge counts: (source, woken task id) → wakes.
pub(crate) type EdgeTable = FxHashMap<(u64, u64), u64>;

/// Every thread's edge table (threads that ended leave theirs here).
pub(crate) fn edge_tables() -> &'static Mutex<Vec<Arc<Mutex<EdgeTable>>>> {
    static TABLES: OnceLock<Mutex<Vec<Arc<Mutex<EdgeTable>>>>> = OnceLock::new();
    TABLES.get_or_init(Mutex::default)
}

thread_local! {
    static EDGES: RefCell<Option<Arc<Mutex<EdgeTable>>>> = const { RefCell::new(None) };
}

fn count_edge(from: u64, to: u64) {
    let counted = EDGES.try_with(|cell| {
        let mut cell = cell.borrow_mut();
        let table = cell.get_or_insert_with(|| {
            let table = Arc::new(Mutex::new(EdgeTable::default()));
            lock(edge_tables()).push(table.clone());
            table
        });
        *lock(table).entry((from, to)).or_insert(0) += 1;
    });
    if counted.is_err() {
        // Thread teardown: this thread's table is gone; count in a shared
        // one.
        let tables = lock(edge_tables());
        if let Some(first) = tables.first() {
            *lock(first).entry((from, to)).or_insert(0) += 1;
        }
    }
}

/// Forgets everything recorded so far (the entries of live tasks restart
/// from zero at their next poll).
pub(crate) fn clear() {
    for table in lock(edge_tables()).iter() {
        lock(table).clear();
    }
    let mut t = lock(tasks());
    t.meta.clear();
    t.ended.clear();
    t.dropped = 0;
    for index in 0..registry::record_count() as u32 {
        if let Some(entry) = existing_wakes(index) {
            entry.task.store(0, Ordering::Relaxed);
        }
    }
}
