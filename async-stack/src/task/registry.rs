//! Storage for task records, stack chunks and task extensions: arenas of
//! pages that are never freed, free lists, and the process-wide counters.
//!
//! Extensions are not handed out: extension `i` belongs to record `i`, and
//! its page is allocated the first time one of its records needs one
//! (a named task, or a root whose executor changed its waker).
//!
//! # Never freed
//!
//! Every record, chunk and extension lives in a page that is allocated once
//! and never deallocated, so a reader on another thread (or a debugger) may
//! dereference any of them at any time. They are reused by later tasks; a
//! reader validates what it copied against the record's task id (see
//! [`crate::task::record`]).
//!
//! # Indices and numbers
//!
//! Records and their extensions are named by index (places hold it, see
//! [`crate::task::place`]); chunks by index + 1, so that `0` in a record
//! field means "none".
//!
//! # Capacity
//!
//! At most [`MAX_TASKS`] records exist, fewer if the environment variable
//! `ASYNC_STACK_MAX_TASKS` asks for fewer (read once, when the first task
//! registers). A task root that finds no record runs untracked: it still
//! links its children (so backtraces work), it is counted once in
//! [`untracked`], and dumps do not show it.

#[cfg(not(async_stack_loom))]
use std::sync::OnceLock;

use crate::pages::Arena;
#[cfg(not(async_stack_loom))]
use crate::pages::PAGE;
#[cfg(not(async_stack_loom))]
use crate::shim::{AtomicPtr, AtomicUsize};
use crate::shim::{AtomicU64, Ordering};
use crate::task::place::INCARNATION_LIMIT;
use crate::task::record::layout::TaskRecord;
use crate::task::record::names::TaskExt;
use crate::task::stack::words::{Chunk, foreign};

/// The most tasks tracked at once: the registry's records (one record
/// index is reserved for untracked tasks). The environment variable
/// `ASYNC_STACK_MAX_TASKS` can lower it; a task root that finds no free
/// record runs untracked (see [`TaskDump::untracked_roots`](crate::TaskDump::untracked_roots)).
pub const MAX_TASKS: usize = if cfg!(async_stack_loom) {
    4
} else {
    (1 << crate::task::place::RECORD_BITS) - 2
};

/// The environment variable that lowers the number of task records.
#[cfg_attr(async_stack_loom, allow(dead_code))]
pub(crate) const MAX_TASKS_VAR: &str = "ASYNC_STACK_MAX_TASKS";

/// The process-wide storage.
pub(crate) struct Registry {
    records: Arena<TaskRecord>,
    chunks: Arena<Chunk>,
    exts: Arena<TaskExt>,
    /// The tokio task id each record's root is filed under, by record
    /// index (see [`crate::task::tokio_task`]): a side table rather than
    /// the extension, so that a root in a tokio task costs 8 bytes, and
    /// no extension unless it has a name.
    tokio_ids: Arena<AtomicU64>,
    next_id: AtomicU64,
    untracked: AtomicU64,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("records", &self.records.len())
            .finish_non_exhaustive()
    }
}

/// The page table of the records, a `static` so that finding a task's
/// record on a root's poll is one load (no lazy initialisation to check).
#[cfg(not(async_stack_loom))]
pub(crate) static RECORD_PAGES: [AtomicPtr<TaskRecord>; MAX_TASKS.div_ceil(PAGE)] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_TASKS.div_ceil(PAGE)];
/// The records handed out so far (the records arena's count).
#[cfg(not(async_stack_loom))]
pub(crate) static RECORD_COUNT: AtomicUsize = AtomicUsize::new(0);
/// The most chunks: eight per record, at most 2^24.
const MAX_CHUNKS: usize = if MAX_TASKS * 8 < 1 << 24 {
    MAX_TASKS * 8
} else {
    1 << 24
};
/// The page tables of chunks and extensions, and the chunks' count: statics,
/// so that the debug descriptor holds their addresses from the start.
#[cfg(not(async_stack_loom))]
pub(crate) static CHUNK_PAGES: [AtomicPtr<Chunk>; MAX_CHUNKS.div_ceil(PAGE)] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_CHUNKS.div_ceil(PAGE)];
#[cfg(not(async_stack_loom))]
static CHUNK_COUNT: AtomicUsize = AtomicUsize::new(0);
#[cfg(not(async_stack_loom))]
pub(crate) static EXT_PAGES: [AtomicPtr<TaskExt>; MAX_TASKS.div_ceil(PAGE)] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_TASKS.div_ceil(PAGE)];
#[cfg(not(async_stack_loom))]
static EXT_COUNT: AtomicUsize = AtomicUsize::new(0);
/// The page table of the tokio ids of roots (see [`Registry`]'s
/// `tokio_ids`), indexed by record index as the extensions are.
#[cfg(not(async_stack_loom))]
pub(crate) static TOKIO_PAGES: [AtomicPtr<AtomicU64>; MAX_TASKS.div_ceil(PAGE)] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_TASKS.div_ceil(PAGE)];
#[cfg(not(async_stack_loom))]
static TOKIO_COUNT: AtomicUsize = AtomicUsize::new(0);

/// A tokio id entry that files its root under no task.
fn no_tokio_id() -> AtomicU64 {
    AtomicU64::new(0)
}

impl Registry {
    fn new(max_tasks: usize) -> Self {
        let max_chunks = max_tasks.saturating_mul(8).min(MAX_CHUNKS);
        #[cfg(not(async_stack_loom))]
        let (records, chunks, exts, tokio_ids) = (
            Arena::with_pages(&RECORD_PAGES, &RECORD_COUNT, max_tasks, TaskRecord::new),
            Arena::with_pages(&CHUNK_PAGES, &CHUNK_COUNT, max_chunks, Chunk::default),
            Arena::with_pages(&EXT_PAGES, &EXT_COUNT, max_tasks, TaskExt::default),
            Arena::with_pages(&TOKIO_PAGES, &TOKIO_COUNT, max_tasks, no_tokio_id),
        );
        #[cfg(async_stack_loom)]
        let (records, chunks, exts, tokio_ids) = (
            Arena::new(max_tasks, TaskRecord::new),
            Arena::new(max_chunks, Chunk::default),
            Arena::new(max_tasks, TaskExt::default),
            Arena::new(max_tasks, no_tokio_id),
        );
        Registry {
            records,
            chunks,
            exts,
            tokio_ids,
            next_id: AtomicU64::new(1),
            untracked: AtomicU64::new(0),
        }
    }
}

/// What `ASYNC_STACK_MAX_TASKS` asks for: the number of records, or a
/// message for a value it cannot use.
#[cfg_attr(async_stack_loom, allow(dead_code))]
pub(crate) fn max_tasks_wanted(value: Option<&std::ffi::OsStr>) -> Result<usize, String> {
    let Some(value) = value else {
        return Ok(MAX_TASKS);
    };
    match value.to_str().map(|v| v.trim().parse::<u64>()) {
        Some(Ok(n)) if n >= 1 && n <= MAX_TASKS as u64 => Ok(n as usize),
        _ => Err(format!(
            "async-stack: {MAX_TASKS_VAR}={value:?} is not a number of tasks from 1 to {MAX_TASKS}; using {MAX_TASKS}"
        )),
    }
}

/// The process-wide registry.
#[cfg(not(async_stack_loom))]
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let max = max_tasks_wanted(std::env::var_os(MAX_TASKS_VAR).as_deref()).unwrap_or_else(
            |message| {
                crate::warn::warn(format_args!("{message}"));
                MAX_TASKS
            },
        );
        Registry::new(max)
    })
}

/// Under loom each model gets its own registry (loom objects cannot outlive
/// a model), leaked for the `'static` the API needs.
#[cfg(async_stack_loom)]
pub(crate) fn registry() -> &'static Registry {
    loom::lazy_static! {
        static ref REGISTRY: Registry = Registry::new(MAX_TASKS);
    }
    &REGISTRY
}

/// Record `index`, if it exists.
#[cfg(not(async_stack_loom))]
#[inline(always)]
pub(crate) fn record(index: u32) -> Option<&'static TaskRecord> {
    let page = RECORD_PAGES
        .get(index as usize / PAGE)?
        .load(Ordering::Acquire);
    if page.is_null() {
        return None;
    }
    // SAFETY: as in `Arena::get`: a non-null page of `RECORD_PAGES` is a
    // leaked `Box<[TaskRecord]>` of `PAGE` records, published with release
    // ordering and never freed.
    Some(unsafe { &*page.add(index as usize % PAGE) })
}

/// Record `index`, if it exists.
#[cfg(async_stack_loom)]
pub(crate) fn record(index: u32) -> Option<&'static TaskRecord> {
    registry().records.get(index as usize)
}

/// The index of the record at address `addr`, if one is there: for a
/// reader that holds a record's address only (an on-CPU sample). Looks in
/// record page `*hint` first, then scans the pages, and leaves the page it
/// found in `*hint`, so that repeated lookups of nearby records are one
/// check each.
#[cfg(not(async_stack_loom))]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn index_of(addr: usize, hint: &mut usize) -> Option<u32> {
    const SIZE: usize = std::mem::size_of::<TaskRecord>();
    let in_page = |page: usize| -> Option<u32> {
        let base = RECORD_PAGES.get(page)?.load(Ordering::Acquire).addr();
        let offset = addr.checked_sub(base)?;
        (base != 0 && offset < PAGE * SIZE && offset % SIZE == 0)
            .then(|| (page * PAGE + offset / SIZE) as u32)
    };
    if let Some(index) = in_page(*hint) {
        return Some(index);
    }
    let pages = record_count().div_ceil(PAGE);
    let page = (0..pages).find(|&p| in_page(p).is_some())?;
    *hint = page;
    in_page(page)
}

/// A free record's index; `None` when every record is taken (counted as an
/// untracked root).
///
/// Every task's registration takes one and its end gives it back, so the
/// thread's cache is read inline and the process's registry only out of
/// line.
#[inline]
pub(crate) fn alloc_record() -> Option<u32> {
    free_cache::pop_cached().or_else(alloc_record_slow)
}

/// [`alloc_record`] when this thread's cache has no index.
#[cold]
#[inline(never)]
fn alloc_record_slow() -> Option<u32> {
    let r = registry();
    let index = free_cache::pop(&r.records.free)
        .map(|i| i as usize)
        .or_else(|| r.records.fresh());
    match index {
        Some(i) => Some(i as u32),
        None => {
            r.untracked.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// Gives a record back for later tasks (its task ended and no waker refers
/// to it).
#[inline]
pub(crate) fn free_record(index: u32) {
    if !free_cache::push_cached(index) {
        free_record_slow(index);
    }
}

/// [`free_record`] when this thread's cache is full or gone.
#[cold]
#[inline(never)]
fn free_record_slow(index: u32) {
    free_cache::push(index, &registry().records.free);
}

/// The last reference to record `index` is gone: its executor waker is
/// dropped and the record goes back to the free list, unless its
/// incarnations are used up (then it is retired for good).
#[inline]
pub(crate) fn recycle(r: &TaskRecord, index: u32) {
    // SAFETY: `refs` just reached 0 on this thread, with acquire ordering
    // (see `waker::release`): the cell holds the task's executor waker and
    // nothing else can read it.
    drop(unsafe { r.take_waker() });
    if foreign::incarnation(r.foreign.load(Ordering::Relaxed)) < INCARNATION_LIMIT {
        free_record(index);
    }
}

/// Task ids a thread takes from the registry's counter at once.
#[cfg_attr(async_stack_loom, allow(dead_code))]
const ID_BLOCK: u64 = 64;

/// A fresh task id. Ids are never reused.
///
/// Each thread takes [`ID_BLOCK`] ids at a time from the registry's
/// counter and hands them out in order: one read-modify-write on a shared
/// line per 64 tasks instead of one per task. So the ids of the tasks
/// registered on one thread increase with their registration, and ids
/// from different threads interleave by block; the ids a thread did not
/// use when it exits are never handed out.
#[cfg(not(async_stack_loom))]
pub(crate) fn next_id() -> u64 {
    use std::cell::Cell;
    thread_local! {
        /// The next id of this thread's block, and the end of the block.
        static BLOCK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    BLOCK
        .try_with(|b| {
            let (next, end) = b.get();
            let (next, end) = if next < end {
                (next, end)
            } else {
                let start = registry().next_id.fetch_add(ID_BLOCK, Ordering::Relaxed);
                (start, start + ID_BLOCK)
            };
            b.set((next + 1, end));
            next
        })
        // Thread-locals of this thread are gone: one id at a time.
        .unwrap_or_else(|_| registry().next_id.fetch_add(1, Ordering::Relaxed))
}

/// Under loom, one id at a time.
#[cfg(async_stack_loom)]
pub(crate) fn next_id() -> u64 {
    next_ordered_id()
}

/// A fresh task id taken alone from the registry's counter: greater than
/// every id taken from it before, so the ids taken this way order their
/// tasks by the time they were taken (the roots filed under tokio tasks
/// take theirs so, which orders the roots of one tokio task by their first
/// poll). One read-modify-write on the counter's line per task.
pub(crate) fn next_ordered_id() -> u64 {
    registry().next_id.fetch_add(1, Ordering::Relaxed)
}

/// Chunk number `number` (its index + 1: `0` names none, as in a
/// record's `chunk` field and a head chunk's directory), if any.
#[inline]
pub(crate) fn chunk(number: u32) -> Option<&'static Chunk> {
    let index = number.checked_sub(1)?;
    registry().chunks.get(index as usize)
}

/// A zeroed chunk's number; `None` when the pool is exhausted.
pub(crate) fn alloc_chunk() -> Option<u32> {
    let r = registry();
    let index = r.chunks.alloc()?;
    let chunk = r.chunks.get(index)?;
    for w in &chunk.words {
        w.store(0, Ordering::Relaxed);
    }
    Some(index as u32 + 1)
}

pub(crate) fn free_chunk(number: u32) {
    if let Some(index) = number.checked_sub(1) {
        registry().chunks.release(index as usize);
    }
}

/// The extension of record `index`, if its page was ever allocated.
#[inline]
pub(crate) fn ext(index: u32) -> Option<&'static TaskExt> {
    registry().exts.get(index as usize)
}

/// The extension of record `index`, allocating its page if needed.
pub(crate) fn ext_or_make(index: u32) -> Option<&'static TaskExt> {
    registry().exts.get_or_make(index as usize)
}

/// The tokio id entry of record `index`, if its page was ever allocated.
#[inline]
pub(crate) fn tokio_id(index: u32) -> Option<&'static AtomicU64> {
    registry().tokio_ids.get(index as usize)
}

/// The tokio id entry of record `index`, allocating its page if needed.
pub(crate) fn tokio_id_or_make(index: u32) -> Option<&'static AtomicU64> {
    registry().tokio_ids.get_or_make(index as usize)
}

/// Roots that ran untracked because every record was taken.
pub(crate) fn untracked() -> u64 {
    registry().untracked.load(Ordering::Relaxed)
}

/// Visits every record that was ever handed out, requesting the lines of
/// the record [`PREFETCH_AHEAD`] places on before each visit: a dump reads
/// two lines of each of many records that are mostly out of cache, and
/// each visit is too long for the processor to run ahead by itself. `f`
/// gets each record's index too (what the sampler keys its per-task cache
/// by).
pub(crate) fn for_each_record(mut f: impl FnMut(u32, &'static TaskRecord)) {
    let records = &registry().records;
    let n = records.len();
    for index in 0..n {
        if let Some(ahead) = records.get(index + PREFETCH_AHEAD) {
            ahead.prefetch();
        }
        if let Some(r) = records.get(index) {
            f(index as u32, r);
        }
    }
}

/// How many records ahead [`for_each_record`] prefetches.
const PREFETCH_AHEAD: usize = 4;

/// Records handed out so far, free or not: the most tasks a dump can see.
pub(crate) fn record_count() -> usize {
    registry().records.len()
}

/// A per-thread cache of free record indices, so that a task that starts
/// and ends on the same thread (the common case) takes and returns its
/// record without touching the registry's mutex. The cache trades with the
/// registry's free list in batches: when it is full it gives back its
/// oldest half, and when it is empty it takes up to half a cache, in one
/// lock each time. So a thread that registers many tasks before any ends
/// (a burst of spawns) locks once per batch rather than once per task. A
/// thread's cached indices go back to the registry when the thread exits.
#[cfg(not(async_stack_loom))]
mod free_cache {
    use std::cell::Cell;

    use crate::shim::{Mutex, lock};

    const CAPACITY: usize = 128;
    const BATCH: usize = CAPACITY / 2;

    /// This thread's free record indices: `items[..len]`, the last freed
    /// on top. Cells, not a `RefCell<Vec>`: nothing here calls out while
    /// an item is half moved, so no borrow flag is needed, and a push or a
    /// pop is a few instructions.
    struct Cache {
        len: Cell<usize>,
        items: [Cell<u32>; CAPACITY],
    }

    impl Cache {
        /// The indices, oldest first, leaving the cache empty.
        fn drain(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
            let len = self.len.get();
            let n = n.min(len);
            // The oldest `n` go; the rest move down.
            let taken: Vec<u32> = (0..n).map(|i| self.items[i].get()).collect();
            for i in n..len {
                self.items[i - n].set(self.items[i].get());
            }
            self.len.set(len - n);
            taken.into_iter()
        }
    }

    impl Drop for Cache {
        fn drop(&mut self) {
            let all: Vec<u32> = self.drain(CAPACITY).collect();
            lock(&super::registry().records.free).extend(all);
        }
    }

    thread_local! {
        static CACHE: Cache = const {
            Cache {
                len: Cell::new(0),
                items: [const { Cell::new(0) }; CAPACITY],
            }
        };
    }

    /// The index this thread freed last, if its cache holds one: the
    /// common case, inlined ([`pop`] is the rest).
    #[inline]
    pub(super) fn pop_cached() -> Option<u32> {
        CACHE
            .try_with(|c| {
                let len = c.len.get().checked_sub(1)?;
                c.len.set(len);
                Some(c.items[len].get())
            })
            .ok()
            .flatten()
    }

    /// A free record index: the one this thread freed last, or one of a
    /// batch taken from `global`, the registry's free list.
    pub(super) fn pop(global: &Mutex<Vec<u32>>) -> Option<u32> {
        if let Some(index) = pop_cached() {
            return Some(index);
        }
        // The cache is empty: refill it with a batch.
        let refilled = CACHE.try_with(|c| {
            let mut g = lock(global);
            let from = g.len().saturating_sub(BATCH);
            let mut len = 0;
            for (i, index) in g.drain(from..).enumerate() {
                c.items[i].set(index);
                len = i + 1;
            }
            c.len.set(len);
        });
        match refilled {
            Ok(()) => pop_cached(),
            // This thread's cache is gone.
            Err(_) => lock(global).pop(),
        }
    }

    /// Caches `index` if this thread's cache has room: the common case,
    /// inlined ([`push`] is the rest). `false`: not cached.
    #[inline]
    pub(super) fn push_cached(index: u32) -> bool {
        CACHE
            .try_with(|c| {
                let len = c.len.get();
                if len >= CAPACITY {
                    return false;
                }
                c.items[len].set(index);
                c.len.set(len + 1);
                true
            })
            .unwrap_or(false)
    }

    /// Caches `index`, first giving the oldest half of a full cache back
    /// to `global`.
    pub(super) fn push(index: u32, global: &Mutex<Vec<u32>>) {
        if push_cached(index) {
            return;
        }
        // The cache is full: the oldest half goes back, then there is room.
        let drained = CACHE.try_with(|c| {
            let oldest: Vec<u32> = c.drain(BATCH).collect();
            lock(global).extend(oldest);
        });
        if drained.is_err() || !push_cached(index) {
            // This thread's cache is gone.
            lock(global).push(index);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// On a fresh thread (an empty cache), with a free list of its own,
        /// and emptied before the thread ends so that nothing reaches the
        /// process's registry.
        #[test]
        fn free_indices_move_in_batches() {
            std::thread::spawn(|| {
                let global = Mutex::new(Vec::new());
                for i in 0..=CAPACITY as u32 {
                    push(i, &global);
                }
                // Full at the last push: the oldest half went back at once.
                assert_eq!(*lock(&global), (0..BATCH as u32).collect::<Vec<_>>());
                // Last freed, first reused.
                assert_eq!(pop(&global), Some(CAPACITY as u32));
                for i in (BATCH as u32..CAPACITY as u32).rev() {
                    assert_eq!(pop(&global), Some(i));
                }
                // Empty: one batch comes back from the free list.
                assert_eq!(pop(&global), Some(BATCH as u32 - 1));
                assert!(lock(&global).is_empty());
                let rest: Vec<u32> = std::iter::from_fn(|| pop(&global)).collect();
                assert_eq!(rest, (0..BATCH as u32 - 1).rev().collect::<Vec<_>>());
            })
            .join()
            .unwrap();
        }

        /// The inlined halves: they use the cache alone, and leave a full
        /// or empty one to `push` and `pop`.
        #[test]
        fn the_inlined_halves_stop_at_a_full_or_empty_cache() {
            std::thread::spawn(|| {
                assert_eq!(pop_cached(), None, "a fresh thread's cache is empty");
                for i in 0..CAPACITY as u32 {
                    assert!(push_cached(i), "room for index {i}");
                }
                assert!(!push_cached(CAPACITY as u32), "full");
                let popped: Vec<u32> = std::iter::from_fn(pop_cached).collect();
                assert_eq!(popped, (0..CAPACITY as u32).rev().collect::<Vec<_>>());
            })
            .join()
            .unwrap();
        }
    }
}

/// Under loom every free index goes through the registry's mutex, which the
/// models cover.
#[cfg(async_stack_loom)]
mod free_cache {
    use crate::shim::{Mutex, lock};

    // Under loom there is no thread cache: every index comes from, and
    // goes back to, the registry's list.
    pub(super) fn pop_cached() -> Option<u32> {
        None
    }
    pub(super) fn push_cached(_: u32) -> bool {
        false
    }
    pub(super) fn pop(global: &Mutex<Vec<u32>>) -> Option<u32> {
        lock(global).pop()
    }
    pub(super) fn push(index: u32, global: &Mutex<Vec<u32>>) {
        lock(global).push(index);
    }
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use super::*;

    /// An address finds its record's index, from any hint; an address
    /// that is not the start of a record finds none.
    #[test]
    fn a_record_address_gives_its_index() {
        // Make sure some records exist.
        let index = alloc_record().expect("a free record");
        let addr = std::ptr::from_ref(record(index).unwrap()).addr();
        for hint in [0, index as usize / PAGE, usize::MAX] {
            let mut h = hint;
            assert_eq!(index_of(addr, &mut h), Some(index));
            assert_eq!(h, index as usize / PAGE, "the page it found");
        }
        let mut h = 0;
        assert_eq!(index_of(addr + 8, &mut h), None, "inside a record");
        assert_eq!(index_of(0, &mut h), None);
        let elsewhere = std::ptr::from_ref(&h).addr();
        assert_eq!(index_of(elsewhere, &mut h), None);
        free_record(index);
    }

    /// Ids come from per-thread blocks: increasing on each thread, and
    /// never the same on two threads, across block boundaries too.
    #[test]
    fn task_ids_increase_per_thread_and_never_repeat() {
        let take = || -> Vec<u64> { (0..3 * ID_BLOCK).map(|_| next_id()).collect() };
        let threads: Vec<Vec<u64>> = (0..4)
            .map(|_| std::thread::spawn(take))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let mut all: Vec<u64> = Vec::new();
        for ids in &threads {
            assert!(ids.is_sorted_by(|a, b| a < b), "{ids:?}");
            assert!(ids.iter().all(|&id| id != 0));
            all.extend(ids);
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "an id was handed out twice");
    }

    #[test]
    fn the_task_cap_reads_a_number_in_range_and_reports_the_rest() {
        use std::ffi::OsStr;
        assert_eq!(max_tasks_wanted(None), Ok(MAX_TASKS));
        assert_eq!(max_tasks_wanted(Some(OsStr::new("1000"))), Ok(1000));
        assert_eq!(max_tasks_wanted(Some(OsStr::new(" 7 "))), Ok(7));
        assert_eq!(
            max_tasks_wanted(Some(OsStr::new(&MAX_TASKS.to_string()))),
            Ok(MAX_TASKS)
        );
        for bad in ["0", "-3", "", "ten", "1e3", &(MAX_TASKS + 1).to_string()] {
            let message = max_tasks_wanted(Some(OsStr::new(bad))).unwrap_err();
            assert!(message.contains(MAX_TASKS_VAR), "{message}");
            assert!(message.contains(&format!("{bad:?}")), "{message}");
        }
    }
}
