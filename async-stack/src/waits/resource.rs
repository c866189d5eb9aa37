//! One wrapped resource's records (holds and waits), and the [`Registry`]
//! of the resources that have waits. The protocol is in the parent
//! module's docs.

// The writers are the wrappers of feature `tokio` (and the tests).
#![cfg_attr(not(feature = "tokio"), allow(dead_code))]

use std::collections::BTreeMap;
use std::panic::Location;
use std::sync::Arc;

use crate::shim::{AtomicPtr, AtomicU64, Mutex, Ordering, fence, lock};

/// What a resource is, as reports name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Mutex,
    RwLock,
    Semaphore,
    JoinHandle,
}

/// What a wait asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ask {
    /// The resource to itself: a `Mutex`, an `RwLock` writer.
    Exclusive,
    /// `n` permits: a `Semaphore` (`RwLock` readers ask 1).
    Shared(u32),
    /// The end of a task: an awaited `JoinHandle`.
    Finish,
}

/// A task holding a resource (or some of its permits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hold {
    /// The holding task (0: outside any traced root).
    pub(crate) task: u64,
    pub(crate) at: &'static Location<'static>,
    pub(crate) since_ms: u64,
    pub(crate) generation: u64,
    /// Permits held (1 for a reader or an exclusive hold).
    pub(crate) permits: u32,
}

/// A task queued for a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Wait {
    /// The waiting task (0: outside any traced root).
    pub(crate) task: u64,
    /// The acquire call; `None` for a `JoinHandle` (its `.await` has no
    /// caller location; the task's frames show it).
    pub(crate) at: Option<&'static Location<'static>>,
    pub(crate) ask: Ask,
    pub(crate) since_ms: u64,
    pub(crate) generation: u64,
}

/// A new generation: unique for the life of the process, never 0.
///
/// Threads take numbers in blocks of 1,024 from one counter, so the
/// uncontended path is a thread-local increment.
#[cfg(not(async_stack_loom))]
pub(crate) fn next_generation() -> u64 {
    use std::cell::Cell;
    const BLOCK: u64 = 1024;
    static NEXT_BLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    thread_local! {
        /// The next number of this thread's block, and the block's end.
        static RANGE: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    let take = |range: &Cell<(u64, u64)>| {
        let (mut next, mut end) = range.get();
        if next == end {
            next = NEXT_BLOCK.fetch_add(BLOCK, std::sync::atomic::Ordering::Relaxed);
            end = next + BLOCK;
        }
        range.set((next + 1, end));
        next
    };
    RANGE
        .try_with(take)
        .unwrap_or_else(|_| NEXT_BLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// [`next_generation`] for the loom models: one shared counter.
#[cfg(async_stack_loom)]
pub(crate) fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The exclusive hold of a resource: written only by its holder, read by
/// anyone as a sequence lock whose sequence is the hold's generation.
///
/// - `acquire` (the new holder, after the tokio acquire succeeded, so after
///   the previous holder's `release`): a release fence, the fields, then
///   the generation with release ordering.
/// - `release` (the holder, before handing the resource back): the
///   generation back to 0.
/// - `read`: the generation (acquire), the fields, an acquire fence, the
///   generation again; equal and non-zero means the fields are the hold's.
///
/// A slot numbers its own holds 1, 2, 3, ... (`last`): holds of one slot
/// are compared only with each other, and the lock orders its holders, so
/// a plain load and store suffice where a process-wide number would cost
/// a thread-local access.
#[derive(Debug)]
pub(crate) struct HoldSlot {
    generation: AtomicU64,
    /// The generation of the latest hold; written only by holders.
    last: AtomicU64,
    task: AtomicU64,
    /// Always null or a `&'static Location<'static>`.
    at: AtomicPtr<Location<'static>>,
    since_ms: AtomicU64,
}

impl HoldSlot {
    pub(crate) fn new() -> Self {
        HoldSlot {
            generation: AtomicU64::new(0),
            last: AtomicU64::new(0),
            task: AtomicU64::new(0),
            at: AtomicPtr::new(std::ptr::null_mut()),
            since_ms: AtomicU64::new(0),
        }
    }

    /// Records `task` as the holder; returns the hold's generation.
    #[inline]
    pub(crate) fn acquire(&self, task: u64, at: &'static Location<'static>, since_ms: u64) -> u64 {
        let generation = self.last.load(Ordering::Relaxed) + 1;
        self.last.store(generation, Ordering::Relaxed);
        fence(Ordering::Release);
        self.task.store(task, Ordering::Relaxed);
        self.at
            .store(std::ptr::from_ref(at).cast_mut(), Ordering::Relaxed);
        self.since_ms.store(since_ms, Ordering::Relaxed);
        self.generation.store(generation, Ordering::Release);
        generation
    }

    /// Ends the hold.
    #[inline]
    pub(crate) fn release(&self) {
        self.generation.store(0, Ordering::Relaxed);
    }

    /// The current hold, if one was read whole.
    pub(crate) fn read(&self) -> Option<Hold> {
        for _ in 0..16 {
            let generation = self.generation.load(Ordering::Acquire);
            if generation == 0 {
                return None;
            }
            let task = self.task.load(Ordering::Relaxed);
            let at = self.at.load(Ordering::Relaxed);
            let since_ms = self.since_ms.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.generation.load(Ordering::Relaxed) != generation {
                continue;
            }
            // SAFETY: `at` only ever holds null or a `&'static Location`
            // (`acquire` stores nothing else), so any value loaded is either.
            let at = unsafe { at.as_ref() }?;
            return Some(Hold {
                task,
                at,
                since_ms,
                generation,
                permits: 1,
            });
        }
        // A holder that changes this fast is not in a deadlock; report a
        // generation that never matches, so no candidate keeps it.
        Some(Hold {
            task: 0,
            at: Location::caller(),
            since_ms: 0,
            generation: u64::MAX,
            permits: 1,
        })
    }

    /// The generation now (0: no holder), for the second pass.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// The lists of a resource, under its lock.
#[derive(Debug, Default)]
struct Lists {
    holds: Vec<Hold>,
    /// In queue order.
    waits: Vec<Wait>,
    /// Counts every change to `holds` and `waits`.
    version: u64,
}

/// A copy of a resource's records at one instant (the exclusive hold is
/// read just before the lists).
#[derive(Clone, Debug)]
pub(crate) struct ResourceCopy {
    pub(crate) key: u64,
    pub(crate) kind: Kind,
    pub(crate) created_at: &'static Location<'static>,
    pub(crate) target: Option<u64>,
    pub(crate) exclusive: Option<Hold>,
    pub(crate) holds: Vec<Hold>,
    pub(crate) waits: Vec<Wait>,
    pub(crate) version: u64,
}

/// One wrapped resource's records.
#[derive(Debug)]
pub(crate) struct Resource {
    /// Unique for the life of the process.
    pub(crate) key: u64,
    pub(crate) kind: Kind,
    pub(crate) created_at: &'static Location<'static>,
    /// For a `JoinHandle`: the tokio id of the task it waits for.
    pub(crate) target: Option<u64>,
    registry: &'static Registry,
    pub(crate) exclusive: HoldSlot,
    lists: Mutex<Lists>,
}

impl Resource {
    pub(crate) fn new(
        kind: Kind,
        created_at: &'static Location<'static>,
        target: Option<u64>,
        registry: &'static Registry,
    ) -> Self {
        Resource {
            key: next_generation(),
            kind,
            created_at,
            target,
            registry,
            exclusive: HoldSlot::new(),
            lists: Mutex::new(Lists::default()),
        }
    }

    /// Records a shared hold of `permits`; returns its generation.
    pub(crate) fn hold_shared(
        &self,
        task: u64,
        at: &'static Location<'static>,
        permits: u32,
    ) -> u64 {
        let generation = next_generation();
        let mut lists = lock(&self.lists);
        lists.holds.push(Hold {
            task,
            at,
            since_ms: stamp(task),
            generation,
            permits,
        });
        lists.version += 1;
        generation
    }

    /// Ends the shared hold `generation`.
    pub(crate) fn release_shared(&self, generation: u64) {
        let mut lists = lock(&self.lists);
        if let Some(i) = lists.holds.iter().position(|h| h.generation == generation) {
            lists.holds.remove(i);
            lists.version += 1;
        }
    }

    /// Changes the permits of the shared hold `generation` (a permit
    /// split or merged).
    pub(crate) fn resize_shared(&self, generation: u64, permits: u32) {
        let mut lists = lock(&self.lists);
        if let Some(h) = lists.holds.iter_mut().find(|h| h.generation == generation) {
            h.permits = permits;
            lists.version += 1;
        }
    }

    /// Records a wait at the end of the queue; returns its generation.
    /// Lists the resource in the registry if it is its first wait.
    pub(crate) fn start_wait(
        self: &Arc<Self>,
        task: u64,
        at: Option<&'static Location<'static>>,
        ask: Ask,
    ) -> u64 {
        let generation = next_generation();
        let mut lists = lock(&self.lists);
        if lists.waits.is_empty() {
            // Resource lock, then registry lock: `detect` never holds the
            // registry's while taking a resource's.
            lock(&self.registry.listed).insert(self.key, Arc::clone(self));
        }
        lists.waits.push(Wait {
            task,
            at,
            ask,
            since_ms: stamp(task),
            generation,
        });
        lists.version += 1;
        generation
    }

    /// Ends the wait `generation`; unlists the resource after its last.
    pub(crate) fn end_wait(&self, generation: u64) {
        let mut lists = lock(&self.lists);
        if let Some(i) = lists.waits.iter().position(|w| w.generation == generation) {
            lists.waits.remove(i);
            lists.version += 1;
            if lists.waits.is_empty() {
                lock(&self.registry.listed).remove(&self.key);
            }
        }
    }

    /// Copies the records.
    pub(crate) fn copy(&self) -> ResourceCopy {
        let exclusive = self.exclusive.read();
        let lists = lock(&self.lists);
        ResourceCopy {
            key: self.key,
            kind: self.kind,
            created_at: self.created_at,
            target: self.target,
            exclusive,
            holds: lists.holds.clone(),
            waits: lists.waits.clone(),
            version: lists.version,
        }
    }

    /// Whether the records are still those of `seen`: same version, same
    /// exclusive hold.
    pub(crate) fn unchanged(&self, seen: &ResourceCopy) -> bool {
        let version = lock(&self.lists).version;
        let was = seen.exclusive.map_or(0, |h| h.generation);
        version == seen.version && self.exclusive.generation() == was
    }
}

/// A recorded wait, ended when dropped: what an acquire future (or an
/// awaited `JoinHandle`) keeps from its first `Pending` to its end.
#[derive(Debug)]
pub(crate) struct WaitRecord {
    resource: Arc<Resource>,
    generation: u64,
}

impl WaitRecord {
    /// Records a wait of `task` for `resource`.
    pub(crate) fn start(
        resource: &Arc<Resource>,
        task: u64,
        at: Option<&'static Location<'static>>,
        ask: Ask,
    ) -> Self {
        WaitRecord {
            generation: resource.start_wait(task, at, ask),
            resource: Arc::clone(resource),
        }
    }
}

impl Drop for WaitRecord {
    fn drop(&mut self) {
        self.resource.end_wait(self.generation);
    }
}

/// The `since` stamp of a record of `task`: the clock's time, or 0 for
/// the unknown task, whose records are never shown with a time (so that
/// code outside traced tasks never starts the clock), and in the loom
/// models.
#[inline]
pub(crate) fn stamp(task: u64) -> u64 {
    #[cfg(not(async_stack_loom))]
    if task != 0 {
        return crate::clock::now_ms();
    }
    let _ = task;
    0
}

/// The resources that have at least one wait.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// By key, so in order of creation (and the same order at every run,
    /// which the loom models need).
    listed: Mutex<BTreeMap<u64, Arc<Resource>>>,
}

impl Registry {
    pub(crate) fn new() -> Self {
        Registry::default()
    }

    /// The process's registry.
    #[cfg(not(async_stack_loom))]
    pub(crate) fn global() -> &'static Registry {
        static GLOBAL: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(Registry::new)
    }

    /// The listed resources, in no order.
    pub(crate) fn listed(&self) -> Vec<Arc<Resource>> {
        lock(&self.listed).values().cloned().collect()
    }

    /// Whether any resource has a wait.
    pub(crate) fn is_empty(&self) -> bool {
        lock(&self.listed).is_empty()
    }
}
