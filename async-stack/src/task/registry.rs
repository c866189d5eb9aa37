//! Slot storage for task roots: pages that are never freed, a free list,
//! and the state word protocol. See the [parent module](super) for the
//! reading protocol.

use std::panic::Location;
use std::sync::Arc;

use super::TaskState;
use super::published::{PublishedStack, StackCopy};
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering, fence, lock};

/// Slots per page.
const PAGE: usize = if cfg!(async_stack_loom) { 2 } else { 128 };
/// Maximum number of pages (so at most `PAGE * MAX_PAGES` live tasks are
/// tracked at once; further roots run untracked and are counted).
const MAX_PAGES: usize = if cfg!(async_stack_loom) { 2 } else { 8192 };

const STATE_BITS: u64 = 2;
const GEN_SHIFT: u64 = STATE_BITS;
const GEN_BITS: u64 = 16;
const TIME_SHIFT: u64 = GEN_SHIFT + GEN_BITS;

pub(crate) const IDLE: u64 = 0;
/// Scheduled since the state's time: registered and not polled yet, or
/// woken from inside its own last poll.
pub(crate) const SCHEDULED: u64 = 1;
pub(crate) const RUNNING: u64 = 2;

/// The `wakes` word: `[generation:16][count:48]`.
const WAKE_COUNT: u64 = (1 << 48) - 1;
const WAKE_GEN_SHIFT: u32 = 48;

/// The generation bits of the `wakes` word of a task of `generation`.
#[inline(always)]
fn wake_tag(generation: u32) -> u64 {
    u64::from(generation & 0xffff) << WAKE_GEN_SHIFT
}

/// Packs a state word: `[time_ms:46][gen:16][state:2]`.
#[inline(always)]
pub(crate) fn pack_state(state: u64, generation: u32, now_ms: u64) -> u64 {
    (now_ms << TIME_SHIFT) | (u64::from(generation & 0xffff) << GEN_SHIFT) | (state & 0b11)
}

/// Unpacks a state word into `(state, generation, since_ms)`.
#[inline(always)]
pub(crate) fn unpack_state(word: u64) -> (u64, u32, u64) {
    (
        word & 0b11,
        ((word >> GEN_SHIFT) & 0xffff) as u32,
        word >> TIME_SHIFT,
    )
}

/// One task's record. `#[repr(C)]` for debugger scripts.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct TaskSlot {
    /// Task id, `0` while the slot is free.
    pub(crate) id: AtomicU64,
    /// Id of the task that spawned this one (`0` if none or unknown).
    pub(crate) parent: AtomicU64,
    /// Where the task was spawned (spawn helper) or first polled.
    pub(crate) spawn_location: AtomicPtr<Location<'static>>,
    /// Interned call-site id of the root frame.
    pub(crate) root_call_site: AtomicU32,
    /// Slot generation, bumped at every registration.
    pub(crate) generation: AtomicU32,
    /// Packed state word (see `pack_state`), written by the poller only.
    pub(crate) state: AtomicU64,
    pub(crate) polls: AtomicU64,
    /// Wakes from outside the task's own polls: `[generation:16][count:48]`,
    /// counted by compare-and-swap so a stale waker of an earlier task in
    /// the slot cannot count.
    pub(crate) wakes: AtomicU64,
    /// The `wakes` count when the last poll started (poller only): a count
    /// beyond it means the task was woken since, so it is scheduled.
    pub(crate) seen_wakes: AtomicU64,
    /// When the first wake after `seen_wakes` happened (ms), by a waker.
    pub(crate) woken_ms: AtomicU64,
    /// Wakes from inside the task's own polls (poller only, no atomic
    /// read-modify-write).
    pub(crate) self_wakes: AtomicU64,
    /// Last birth number handed to a frame of this task (poller only).
    pub(crate) births: AtomicU32,
    /// Optional task name; readers load it without locking.
    pub(crate) name: NameCell,
    pub(crate) stack: PublishedStack,
}

/// How many slots ahead of the one it visits [`Registry::for_each_slot`]
/// prefetches.
const PREFETCH_AHEAD: usize = 4;

impl TaskSlot {
    /// Asks the processor to bring the lines a dump reads into the cache.
    #[inline]
    fn prefetch(&self) {
        crate::sync::prefetch(std::ptr::from_ref(self).cast());
        crate::sync::prefetch(std::ptr::from_ref(&self.stack).cast());
        self.stack.prefetch();
    }

    fn new() -> Self {
        TaskSlot {
            id: AtomicU64::new(0),
            parent: AtomicU64::new(0),
            spawn_location: AtomicPtr::new(std::ptr::null_mut()),
            root_call_site: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            state: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            wakes: AtomicU64::new(0),
            seen_wakes: AtomicU64::new(0),
            woken_ms: AtomicU64::new(0),
            self_wakes: AtomicU64::new(0),
            births: AtomicU32::new(0),
            name: NameCell::default(),
            stack: PublishedStack::new(),
        }
    }

    /// Poller: the task starts a poll. Wakes counted so far are consumed
    /// by it.
    #[inline(always)]
    pub(crate) fn start_poll(&self, generation: u32, now_ms: u64) {
        self.state
            .store(pack_state(RUNNING, generation, now_ms), Ordering::Release);
        let polls = self.polls.load(Ordering::Relaxed);
        self.polls.store(polls.wrapping_add(1), Ordering::Relaxed);
        let wakes = self.wakes.load(Ordering::Acquire) & WAKE_COUNT;
        self.seen_wakes.store(wakes, Ordering::Release);
    }

    /// Poller: the next birth number for a frame first polled in this task
    /// (load and store: only the polling thread calls it).
    #[inline]
    pub(crate) fn next_birth(&self) -> u32 {
        let b = self.births.load(Ordering::Relaxed).wrapping_add(1).max(1);
        self.births.store(b, Ordering::Relaxed);
        b
    }

    /// Poller: the task's poll returned `Pending` after waking itself
    /// `self_wakes` times (a yield: it is scheduled again). Plain stores:
    /// wakes from elsewhere are counted in `wakes`, which readers compare
    /// with `seen_wakes`.
    #[inline(always)]
    pub(crate) fn end_poll(&self, generation: u32, now_ms: u64, self_wakes: u32) {
        let state = if self_wakes == 0 {
            IDLE
        } else {
            let n = self.self_wakes.load(Ordering::Relaxed);
            self.self_wakes
                .store(n.wrapping_add(u64::from(self_wakes)), Ordering::Relaxed);
            SCHEDULED
        };
        self.state
            .store(pack_state(state, generation, now_ms), Ordering::Release);
    }

    /// Waker, from outside the task's poll: counts a wake if the slot still
    /// holds the task of `generation`, and returns whether it did. The
    /// first wake after a poll started stamps `woken_ms` (reading the clock
    /// only then).
    pub(crate) fn wake(&self, generation: u32, now_ms: impl Fn() -> u64) -> bool {
        let tag = wake_tag(generation);
        let mut cur = self.wakes.load(Ordering::Acquire);
        loop {
            if cur & !WAKE_COUNT != tag {
                return false;
            }
            let next = tag | (cur.wrapping_add(1) & WAKE_COUNT);
            match self
                .wakes
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        if cur & WAKE_COUNT == self.seen_wakes.load(Ordering::Acquire) {
            self.woken_ms.store(now_ms(), Ordering::Release);
        }
        true
    }

    /// Readers: the task's state and since when (ms), from the poller's
    /// state word and the wakes counted since its last poll started.
    fn state_since(&self) -> (TaskState, u64) {
        let (state, generation, since_ms) = unpack_state(self.state.load(Ordering::Acquire));
        match state {
            RUNNING => (TaskState::Running, since_ms),
            SCHEDULED => (TaskState::Scheduled, since_ms),
            _ => {
                let wakes = self.wakes.load(Ordering::Acquire);
                let current = wakes & !WAKE_COUNT == wake_tag(generation);
                if current && wakes & WAKE_COUNT != self.seen_wakes.load(Ordering::Acquire) {
                    let woken = self.woken_ms.load(Ordering::Acquire);
                    (TaskState::Scheduled, woken.max(since_ms))
                } else {
                    (TaskState::Idle, since_ms)
                }
            }
        }
    }

    /// Readers: wakes of every kind.
    fn wakes_total(&self) -> u64 {
        (self.wakes.load(Ordering::Relaxed) & WAKE_COUNT)
            .wrapping_add(self.self_wakes.load(Ordering::Relaxed))
    }
}

/// A task name that readers load without taking a lock.
#[cfg(not(async_stack_loom))]
#[derive(Debug, Default)]
pub(crate) struct NameCell {
    name: arc_swap::ArcSwapOption<String>,
    /// Whether `name` may be `Some`; only the registering thread writes it,
    /// so unnamed tasks (most of them) never touch `arc-swap`.
    maybe_named: std::sync::atomic::AtomicBool,
}

#[cfg(not(async_stack_loom))]
impl NameCell {
    pub(crate) fn store(&self, name: Option<Arc<String>>) {
        use std::sync::atomic::Ordering::Relaxed;
        let named = name.is_some();
        if named || self.maybe_named.load(Relaxed) {
            self.name.store(name);
            self.maybe_named.store(named, Relaxed);
        }
    }
    pub(crate) fn load(&self) -> Option<Arc<String>> {
        self.name.load_full()
    }
}

/// Under loom, a mutex stands in for `arc-swap` (which loom cannot model).
#[cfg(async_stack_loom)]
#[derive(Debug, Default)]
pub(crate) struct NameCell(Mutex<Option<Arc<String>>>);

#[cfg(async_stack_loom)]
impl NameCell {
    pub(crate) fn store(&self, name: Option<Arc<String>>) {
        *lock(&self.0) = name;
    }
    pub(crate) fn load(&self) -> Option<Arc<String>> {
        lock(&self.0).clone()
    }
}

type Page = [TaskSlot; PAGE];

/// Allocates a page of free slots directly on the heap. Kept out of line:
/// inlined, the page was built on the stack of every `register` call.
#[cold]
#[inline(never)]
fn new_page() -> Box<Page> {
    let slots: Box<[TaskSlot]> = (0..PAGE).map(|_| TaskSlot::new()).collect();
    match slots.try_into() {
        Ok(page) => page,
        Err(_) => unreachable!("the iterator yields exactly PAGE slots"),
    }
}

/// The set of all task slots.
pub(crate) struct Registry {
    pages: Box<[AtomicPtr<Page>]>,
    /// Next never-used slot index.
    fresh: AtomicUsize,
    /// Indices of freed slots.
    free: Mutex<Vec<u32>>,
    next_id: AtomicU64,
    /// Roots that could not get a slot (registry full).
    untracked: AtomicU64,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("fresh", &self.fresh.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What a registration hands back to the root.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Registration {
    pub(crate) slot: &'static TaskSlot,
    pub(crate) index: u32,
    pub(crate) id: u64,
    pub(crate) generation: u32,
}

/// Task metadata recorded at registration.
pub(crate) struct NewTask<'a> {
    pub(crate) parent: u64,
    pub(crate) location: Option<&'static Location<'static>>,
    pub(crate) root_call_site: u32,
    pub(crate) name: Option<&'a Arc<String>>,
    pub(crate) now_ms: u64,
}

impl Registry {
    pub(crate) fn new() -> Self {
        Registry {
            pages: (0..MAX_PAGES)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            fresh: AtomicUsize::new(0),
            free: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            untracked: AtomicU64::new(0),
        }
    }

    fn slot(&'static self, index: usize) -> Option<&'static TaskSlot> {
        let page = self.pages.get(index / PAGE)?.load(Ordering::Acquire);
        // SAFETY: pages are leaked boxes that are never freed once published
        // (see `page_for`), so a non-null page pointer is valid forever.
        let page = unsafe { page.cast_const().as_ref()? };
        page.get(index % PAGE)
    }

    fn page_for(&'static self, index: usize) -> Option<&'static TaskSlot> {
        let cell = self.pages.get(index / PAGE)?;
        if cell.load(Ordering::Acquire).is_null() {
            let fresh = Box::into_raw(new_page());
            if cell
                .compare_exchange(
                    std::ptr::null_mut(),
                    fresh,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
            {
                // SAFETY: `fresh` came from `Box::into_raw` above and lost the
                // race, so it was never published to any other thread.
                drop(unsafe { Box::from_raw(fresh) });
            }
        }
        self.slot(index)
    }

    /// Takes a slot and publishes a new task in it.
    pub(crate) fn register(&'static self, task: NewTask<'_>) -> Option<Registration> {
        let reused = free_cache::pop(&self.free);
        let index = match reused {
            Some(i) => i as usize,
            None => {
                let i = self.fresh.fetch_add(1, Ordering::Relaxed);
                if i >= PAGE * MAX_PAGES {
                    self.fresh.fetch_sub(1, Ordering::Relaxed);
                    self.untracked.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                i
            }
        };
        let slot = self.page_for(index)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let generation = slot.generation.load(Ordering::Relaxed).wrapping_add(1);
        // Readers that still hold the previous id must see it change if they
        // observe any of the stores below (seqlock writer fence).
        fence(Ordering::Release);
        slot.generation.store(generation, Ordering::Relaxed);
        slot.parent.store(task.parent, Ordering::Relaxed);
        slot.spawn_location.store(
            task.location
                .map_or(std::ptr::null_mut(), |l| l as *const _ as *mut _),
            Ordering::Relaxed,
        );
        slot.root_call_site
            .store(task.root_call_site, Ordering::Relaxed);
        slot.state.store(
            pack_state(SCHEDULED, generation, task.now_ms),
            Ordering::Relaxed,
        );
        slot.polls.store(0, Ordering::Relaxed);
        slot.wakes.store(wake_tag(generation), Ordering::Relaxed);
        slot.seen_wakes.store(0, Ordering::Relaxed);
        slot.woken_ms.store(0, Ordering::Relaxed);
        slot.self_wakes.store(0, Ordering::Relaxed);
        slot.name.store(task.name.cloned());
        slot.stack.reset();
        slot.id.store(id, Ordering::Release);
        Some(Registration {
            slot,
            index: index as u32,
            id,
            generation,
        })
    }

    /// Ends a task: its slot stops being reported and becomes reusable.
    pub(crate) fn deregister(&'static self, reg: &Registration) {
        reg.slot.id.store(0, Ordering::Release);
        free_cache::push(reg.index, &self.free);
    }

    /// Takes back slots from a thread's cache (when the thread exits).
    /// Under loom there is no cache.
    #[cfg(not(async_stack_loom))]
    fn return_free(&self, indices: &mut Vec<u32>) {
        lock(&self.free).append(indices);
    }

    /// Visits every slot that is or was in use.
    ///
    /// A dump reads a few cache lines of each slot, slots are far apart and
    /// mostly out of cache, and each visit is too long for the processor to
    /// run ahead into the next slots by itself: so the lines of the slot
    /// [`PREFETCH_AHEAD`] places on are requested before each visit.
    pub(crate) fn for_each_slot(&'static self, mut f: impl FnMut(&'static TaskSlot)) {
        let n = self.fresh.load(Ordering::Acquire).min(PAGE * MAX_PAGES);
        for index in 0..n {
            if index + PREFETCH_AHEAD < n
                && let Some(ahead) = self.slot(index + PREFETCH_AHEAD)
            {
                ahead.prefetch();
            }
            if let Some(slot) = self.slot(index) {
                f(slot);
            }
        }
    }

    /// Roots that ran untracked because every slot was taken.
    pub(crate) fn untracked(&self) -> u64 {
        self.untracked.load(Ordering::Relaxed)
    }
}

/// A per-thread cache of free slot indices, so that a task that starts
/// and ends on the same thread (the common case) takes and returns its slot
/// without touching the registry's mutex. The cache trades with the
/// registry's free list in batches: when it is full it gives back its
/// oldest half, and when it is empty it takes up to half a cache, in one
/// lock each time. So a thread that registers many tasks before any ends
/// (a burst of spawns) locks once per batch rather than once per task. A
/// thread's cached slots go back to the registry when the thread exits.
#[cfg(not(async_stack_loom))]
mod free_cache {
    use std::cell::RefCell;

    use crate::sync::{Mutex, lock};

    const CAPACITY: usize = 128;
    const BATCH: usize = CAPACITY / 2;

    struct Cache(Vec<u32>);

    impl Drop for Cache {
        fn drop(&mut self) {
            super::registry().return_free(&mut self.0);
        }
    }

    thread_local! {
        static CACHE: RefCell<Cache> = const { RefCell::new(Cache(Vec::new())) };
    }

    /// A free slot index: the one this thread freed last, or one of a batch
    /// taken from `global`.
    pub(super) fn pop(global: &Mutex<Vec<u32>>) -> Option<u32> {
        CACHE
            .try_with(|c| {
                let Ok(mut c) = c.try_borrow_mut() else {
                    return lock(global).pop();
                };
                if c.0.is_empty() {
                    let mut g = lock(global);
                    let from = g.len().saturating_sub(BATCH);
                    c.0.extend(g.drain(from..));
                }
                c.0.pop()
            })
            .unwrap_or_else(|_| lock(global).pop())
    }

    /// Caches `index`, first giving the oldest half of a full cache back to
    /// `global`.
    pub(super) fn push(index: u32, global: &Mutex<Vec<u32>>) {
        let cached = CACHE.try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return false;
            };
            if c.0.len() >= CAPACITY {
                lock(global).extend(c.0.drain(..BATCH));
            }
            c.0.push(index);
            true
        });
        if cached != Ok(true) {
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
        fn free_slots_move_in_batches() {
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
    }
}

/// Under loom every free slot goes through the registry's mutex, which the
/// models cover.
#[cfg(async_stack_loom)]
mod free_cache {
    use crate::sync::{Mutex, lock};

    pub(super) fn pop(global: &Mutex<Vec<u32>>) -> Option<u32> {
        lock(global).pop()
    }
    pub(super) fn push(index: u32, global: &Mutex<Vec<u32>>) {
        lock(global).push(index);
    }
}

/// The process-wide registry.
#[cfg(not(async_stack_loom))]
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(Registry::new)
}

/// Under loom each model gets its own registry (loom objects cannot outlive
/// a model), leaked for the `'static` the API needs.
#[cfg(async_stack_loom)]
pub(crate) fn registry() -> &'static Registry {
    loom::lazy_static! {
        static ref REGISTRY: Registry = Registry::new();
    }
    &REGISTRY
}

/// A validated copy of one live task's slot.
#[derive(Debug, Clone)]
pub(crate) struct RawTask {
    pub(crate) id: u64,
    pub(crate) parent: u64,
    pub(crate) location: Option<&'static Location<'static>>,
    pub(crate) root_call_site: u32,
    pub(crate) state: TaskState,
    pub(crate) since_ms: u64,
    pub(crate) polls: u64,
    pub(crate) wakes: u64,
    pub(crate) name: Option<Arc<String>>,
    /// Whether the published stack was copied (into the caller's buffer);
    /// `false` if every copy attempt was torn.
    pub(crate) stack_copied: bool,
    /// Copies of the stack that were torn and retried.
    pub(crate) torn: u32,
}

/// How many times a reader retries a torn copy of a published stack before
/// giving up on that stack (the task is still reported, without frames).
pub(crate) const COPY_TRIES: u32 = 16;

impl TaskSlot {
    /// The id, state and state timestamp (ms) of the task in this slot, if
    /// any: two loads, for deciding whether to [`read`](Self::read) it.
    /// Not validated: the task may end or change state right after.
    pub(crate) fn peek(&self) -> Option<(u64, TaskState, u64)> {
        let id = self.id.load(Ordering::Acquire);
        if id == 0 {
            return None;
        }
        let (state, since_ms) = self.state_since();
        Some((id, state, since_ms))
    }

    /// Copies this slot if it holds a live task, its published stack into
    /// `copy`. Never blocks: no lock, no waiting for a running poll. Returns
    /// `None` for a free slot or for a task that ended (or was replaced)
    /// while being read.
    pub(crate) fn read(&self, copy: &mut StackCopy) -> Option<RawTask> {
        let id = self.id.load(Ordering::Acquire);
        if id == 0 {
            return None;
        }
        let parent = self.parent.load(Ordering::Relaxed);
        let location = self.spawn_location.load(Ordering::Relaxed);
        // SAFETY: `spawn_location` holds null or a pointer derived from a
        // `&'static Location` (see `Registry::register`).
        let location = unsafe { location.cast_const().as_ref() };
        let root_call_site = self.root_call_site.load(Ordering::Relaxed);
        let (state, since_ms) = self.state_since();
        let polls = self.polls.load(Ordering::Relaxed);
        let wakes = self.wakes_total();
        let name = self.name.load();
        let mut stack_copied = false;
        let mut torn = 0;
        while torn < COPY_TRIES {
            match self.stack.copy_into(copy) {
                Ok(()) => {
                    stack_copied = true;
                    break;
                }
                Err(_) => {
                    torn += 1;
                    std::hint::spin_loop();
                }
            }
        }
        // Seqlock validation: if the slot changed hands while we read, every
        // field above may belong to another task.
        fence(Ordering::Acquire);
        if self.id.load(Ordering::Relaxed) != id {
            return None;
        }
        Some(RawTask {
            id,
            parent,
            location,
            root_call_site,
            state,
            since_ms,
            polls,
            wakes,
            name,
            stack_copied,
            torn,
        })
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use super::*;

    fn new_task(parent: u64) -> NewTask<'static> {
        NewTask {
            parent,
            location: None,
            root_call_site: 1,
            name: None,
            now_ms: 0,
        }
    }

    /// A reader racing with a task that ends and a new task that takes the
    /// same slot never reports a mix of the two: the parent field it reports
    /// always belongs to the id it reports.
    #[test]
    fn slot_reuse_is_never_mixed() {
        loom::model(|| {
            let reg = registry();
            let first = reg.register(new_task(100)).unwrap();
            let slot = first.slot;
            let t = loom::thread::spawn(move || {
                let reg = registry();
                reg.deregister(&first);
                reg.register(new_task(200)).unwrap()
            });
            if let Some(raw) = slot.read(&mut StackCopy::default()) {
                let expected = if raw.id == first.id { 100 } else { 200 };
                assert_eq!(raw.parent, expected);
            }
            let second = t.join().unwrap();
            registry().deregister(&second);
        });
    }

    /// A waker of an ended task cannot mark the task that reuses its slot.
    #[test]
    fn stale_waker_cannot_touch_new_task() {
        loom::model(|| {
            let reg = registry();
            let first = reg.register(new_task(1)).unwrap();
            let slot = first.slot;
            let stale_generation = first.generation;
            reg.deregister(&first);
            let second = reg.register(new_task(2)).unwrap();
            second.slot.start_poll(second.generation, 0);
            let t = loom::thread::spawn(move || slot.wake(stale_generation, || 0));
            second.slot.end_poll(second.generation, 0, 0);
            assert!(!t.join().unwrap());
            assert_eq!(slot.state_since().0, TaskState::Idle);
            assert_eq!(slot.wakes_total(), 0);
            registry().deregister(&second);
        });
    }

    /// A wake from another thread during a poll is not lost: the task ends
    /// the poll scheduled, with the wake counted.
    #[test]
    fn wake_during_poll_leaves_task_scheduled() {
        loom::model(|| {
            let reg = registry();
            let r = reg.register(new_task(1)).unwrap();
            r.slot.start_poll(r.generation, 0);
            let slot = r.slot;
            let generation = r.generation;
            let t = loom::thread::spawn(move || slot.wake(generation, || 0));
            r.slot.end_poll(r.generation, 0, 0);
            assert!(t.join().unwrap());
            assert_eq!(r.slot.state_since().0, TaskState::Scheduled);
            assert_eq!(r.slot.wakes_total(), 1);
            // The next poll consumes the wake.
            r.slot.start_poll(r.generation, 0);
            r.slot.end_poll(r.generation, 0, 0);
            assert_eq!(r.slot.state_since().0, TaskState::Idle);
            registry().deregister(&r);
        });
    }
}
