//! One wrapped resource's records (holds and waits), and the [`Registry`]
//! of the resources that have waits. The protocol is in the parent
//! module's docs.
//!
//! # What a debugger reads
//!
//! The debugger scripts read these records from memory alone, through the
//! debug descriptor (`debug/`), so the parts they read have layouts the
//! descriptor can state ([`offset_of!`](std::mem::offset_of)):
//!
//! - the registry mirrors its listed resources in slots of a never-freed
//!   page table (`pages.rs`): slot `i` holds the address of the resource
//!   at index `i` of the registry, or null. Both change together, under
//!   the registry's lock, when a resource gets its first wait and when it
//!   is unlisted (see [`Registry`]). A listed resource may have no wait
//!   (a lock whose owner lives on after its waits ended): its `waits`
//!   length is 0, and it shows nothing;
//! - a resource keeps a [`ListsView`] of its lists: their data pointers
//!   and lengths, rewritten under the resource's lock after each change,
//!   and a version that is odd while a change is under way, so that a
//!   debugger that stopped the process inside one says so rather than
//!   read a vector that is being moved;
//! - the exclusive hold is the [`HoldSlot`]'s words (generation `0`: no
//!   holder), which the uncontended path writes as it always did;
//! - the first shared holds are in [`SharedSlot`]s, an array behind a
//!   pointer (null for the kinds without shared holds), each a
//!   [`HoldSlot`] whose generation is [`CLAIMED`] while its hold is being
//!   written;
//! - [`Kind`] is a `u8` of fixed values, and [`Hold`] and [`Wait`] hold
//!   plain words (`Option<&Location>` is a pointer, null for `None`).

// The writers are the wrappers of feature `tokio` (and the tests).
#![cfg_attr(not(feature = "tokio"), allow(dead_code))]

use std::mem::offset_of;
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::pages::{Arena, PAGE};
use crate::shim::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering, fence, lock};
#[cfg(not(async_stack_loom))]
use crate::task::registry::MAX_TASKS;
use crate::waits::join::{JoinRead, JoinSlot};
pub(crate) use crate::waits::slot::CLAIMED;
use crate::waits::slot::{Seen, read_whole};
use crate::waits::waiter::Waiter;

/// What a resource is, as reports name it. A `u8` of fixed values: the
/// debug descriptor gives them to debuggers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Kind {
    Mutex = 0,
    RwLock = 1,
    Semaphore = 2,
    JoinHandle = 3,
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
    /// The await site the waiter polled the acquire future or
    /// `JoinHandle` at, and the frame that was there ([`Waiter::awaiting`];
    /// `0`: none known). The wait holds only while that frame is
    /// suspended there.
    pub(crate) awaiting: u64,
    /// That frame's ancestry ([`Waiter::path`]; `0`: not known): the wait
    /// holds only while the frames above it are where they were too.
    pub(crate) path: u64,
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
///   generation again; equal, non-zero and not [`CLAIMED`] means the
///   fields are the hold's.
///
/// A slot numbers its own holds 1, 2, 3, ... (`last`): holds of one slot
/// are compared only with each other, and the lock orders its holders, so
/// a plain load and store suffice where a process-wide number would cost
/// a thread-local access. A [`SharedSlot`] is a `HoldSlot` whose holders
/// are ordered by its claim instead of the lock.
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
    /// Where a debugger finds the words of a hold (see the module docs).
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const GENERATION_OFFSET: usize = offset_of!(HoldSlot, generation);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const TASK_OFFSET: usize = offset_of!(HoldSlot, task);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const AT_OFFSET: usize = offset_of!(HoldSlot, at);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const SINCE_OFFSET: usize = offset_of!(HoldSlot, since_ms);

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
        self.write(task, at, since_ms, || {})
    }

    /// Writes a hold as its holder: a new generation, a release fence,
    /// the fields (and whatever `more` writes), then the generation with
    /// release ordering. The generation word holds 0 or [`CLAIMED`]
    /// meanwhile, so a reader that read any field of this write reads
    /// another generation after it and retries.
    #[inline(always)]
    fn write(
        &self,
        task: u64,
        at: &'static Location<'static>,
        since_ms: u64,
        more: impl FnOnce(),
    ) -> u64 {
        let generation = self.next_generation();
        fence(Ordering::Release);
        self.task.store(task, Ordering::Relaxed);
        self.at
            .store(std::ptr::from_ref(at).cast_mut(), Ordering::Relaxed);
        self.since_ms.store(since_ms, Ordering::Relaxed);
        more();
        self.generation.store(generation, Ordering::Release);
        generation
    }

    /// Numbers a new hold of this slot (its holder only; see the type's
    /// docs): `last` + 1, stored back as `last`.
    #[inline(always)]
    fn next_generation(&self) -> u64 {
        let generation = self.last.load(Ordering::Relaxed) + 1;
        self.last.store(generation, Ordering::Relaxed);
        generation
    }

    /// Ends the hold.
    #[inline]
    pub(crate) fn release(&self) {
        self.generation.store(0, Ordering::Relaxed);
    }

    /// The current hold, if one was read whole.
    pub(crate) fn read(&self) -> Option<Hold> {
        match self.read_with(|| 1) {
            SlotRead::Free => None,
            SlotRead::Held(hold) => Some(hold),
            // A holder that changes this fast is not in a deadlock; report
            // a generation that never matches, so no candidate keeps it.
            SlotRead::Unsettled => Some(Hold {
                task: 0,
                at: Location::caller(),
                since_ms: 0,
                generation: u64::MAX,
                permits: 1,
            }),
        }
    }

    /// The sequence-lock read, with the hold's `permits` read between the
    /// two loads of the generation.
    fn read_with(&self, permits: impl Fn() -> u32) -> SlotRead {
        let seen = read_whole(&self.generation, || {
            (
                self.task.load(Ordering::Relaxed),
                self.at.load(Ordering::Relaxed),
                self.since_ms.load(Ordering::Relaxed),
                permits(),
            )
        });
        match seen {
            Seen::Free => SlotRead::Free,
            Seen::Unsettled => SlotRead::Unsettled,
            Seen::Whole(generation, (task, at, since_ms, permits)) => {
                // SAFETY: `at` only ever holds null or a `&'static Location`
                // (`write` stores nothing else), so any value loaded is
                // either.
                match unsafe { at.as_ref() } {
                    None => SlotRead::Free,
                    Some(at) => SlotRead::Held(Hold {
                        task,
                        at,
                        since_ms,
                        generation,
                        permits,
                    }),
                }
            }
        }
    }

    /// The generation now (0: no holder), for the second pass.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// What a read of a hold slot found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotRead {
    /// Nobody holds it.
    Free,
    /// A hold, read whole.
    Held(Hold),
    /// A hold being written every time the reader looked (a holder
    /// preempted between its claim and its last store).
    Unsettled,
}

/// How many shared holds (`RwLock` readers, `Semaphore` permits) a
/// resource keeps in [`SharedSlot`]s; more at once go to its list.
pub(crate) const SHARED_SLOTS: usize = 4;

/// A shared hold kept without the resource's lock: a [`HoldSlot`] that a
/// holder *claims* with one compare-and-swap of its generation (0 to
/// [`CLAIMED`]) before it writes the hold, and releases with one store of
/// 0. A shared hold in the list cost four read-modify-writes (the
/// resource's lock, taken at the acquire and again at the release); a
/// slot costs one.
///
/// Only the claimer writes the slot until it releases it, so `last`
/// numbers the slot's holds as [`HoldSlot`]'s does: the release stores 0
/// with release ordering and the claim reads it with acquire ordering,
/// which orders one holder's `last` before the next's.
#[derive(Debug)]
pub(crate) struct SharedSlot {
    hold: HoldSlot,
    /// The permits held (1 for an `RwLock` reader).
    permits: AtomicU32,
}

impl SharedSlot {
    /// Where a debugger finds the words of the hold.
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const HOLD_OFFSET: usize = offset_of!(SharedSlot, hold);

    fn new() -> Self {
        SharedSlot {
            hold: HoldSlot::new(),
            permits: AtomicU32::new(0),
        }
    }

    /// Claims the slot if it is free and records the hold in it; whether
    /// it did.
    #[inline]
    fn try_hold(
        &self,
        task: u64,
        at: &'static Location<'static>,
        since_ms: u64,
        permits: u32,
    ) -> bool {
        // A load first: a taken slot costs no read-modify-write.
        if self.hold.generation.load(Ordering::Relaxed) != 0 || !self.claim() {
            return false;
        }
        self.hold.write(task, at, since_ms, || {
            self.permits.store(permits, Ordering::Relaxed);
        });
        true
    }

    /// Takes the slot if it is free (0 to [`CLAIMED`]); whether it did.
    /// Acquire: it reads the previous holder's release of the slot.
    #[inline]
    fn claim(&self) -> bool {
        self.hold
            .generation
            .compare_exchange(0, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Changes the permits of the hold (its holder only): under a new
    /// generation, so that a second pass sees the change.
    fn resize(&self, permits: u32) {
        let hold = &self.hold;
        hold.generation.store(CLAIMED, Ordering::Relaxed);
        // `CLAIMED` before the new permits: a reader that reads them then
        // reads `CLAIMED` or the new generation, and retries.
        fence(Ordering::Release);
        self.permits.store(permits, Ordering::Relaxed);
        hold.generation
            .store(hold.next_generation(), Ordering::Release);
    }

    /// Ends the hold and frees the slot.
    #[inline]
    fn release(&self) {
        self.hold.generation.store(0, Ordering::Release);
    }

    /// The hold, read as [`HoldSlot::read`] reads, and what the second
    /// pass compares: the generation read (or [`CLAIMED`] if none was
    /// read whole) and `last`, loaded before it. `last` grows with every
    /// claim, so a second pass that finds both again knows that no hold
    /// began or ended between the two reads.
    fn read(&self) -> (SlotRead, SlotSeen) {
        let last = self.hold.last.load(Ordering::Acquire);
        let read = self.hold.read_with(|| self.permits.load(Ordering::Relaxed));
        let generation = match read {
            SlotRead::Free => 0,
            SlotRead::Held(h) => h.generation,
            SlotRead::Unsettled => CLAIMED,
        };
        (read, SlotSeen { generation, last })
    }

    /// Whether the slot is as `seen` found it.
    fn unchanged(&self, seen: SlotSeen) -> bool {
        self.hold.generation.load(Ordering::Acquire) == seen.generation
            && self.hold.last.load(Ordering::Acquire) == seen.last
    }
}

/// What a first pass saw of a [`SharedSlot`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotSeen {
    generation: u64,
    last: u64,
}

/// Where a shared hold is recorded, which its end and its resizes need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SharedPlace {
    /// In the resource's shared slot of this index.
    Slot(usize),
    /// In the resource's list, under this generation.
    Listed(u64),
}

/// The lists of a resource, under its lock.
#[derive(Debug, Default)]
struct Lists {
    holds: Vec<Hold>,
    /// In queue order.
    waits: Vec<Wait>,
    /// The resource's index in the registry while it is listed.
    index: Option<usize>,
    /// Whether its [`Owner`] is alive: set by [`Owner::new`], cleared
    /// once by the owner's drop. An owned resource stays listed past its last
    /// wait (see [`Registry`]).
    owned: bool,
    /// Whether the waits keep a strong reference of the resource's `Arc`
    /// (leaked, so counted but held by no `Arc` value): set while the
    /// resource has waits and no owner, given up by the last wait's end.
    /// See "Why the raw addresses are sound" at [`Registry`].
    kept: bool,
}

/// A resource's lists as a debugger reads them: plain words, written under
/// the resource's lock by [`Resource::edit`] after each change.
///
/// `std`'s atomics, not `crate::shim`'s: the in-process readers read only
/// `version`, and only under the lock, and loom cannot model a debugger.
#[derive(Debug, Default)]
pub(crate) struct ListsView {
    /// The lists' version: even, advanced by 2 at each change of `holds`
    /// or `waits`, and odd while a change is under way (a debugger that
    /// stopped the process inside one reads an odd version).
    pub(crate) version: std::sync::atomic::AtomicU64,
    /// The data pointer and length of `waits`.
    pub(crate) waits: std::sync::atomic::AtomicPtr<Wait>,
    pub(crate) waits_len: std::sync::atomic::AtomicUsize,
    /// The data pointer and length of `holds`.
    pub(crate) holds: std::sync::atomic::AtomicPtr<Hold>,
    pub(crate) holds_len: std::sync::atomic::AtomicUsize,
}

/// Which list an edit changes.
#[derive(Clone, Copy)]
enum Edited {
    Holds,
    Waits,
}

/// A copy of a resource's records at one instant (the exclusive hold is
/// read just before the lists).
#[derive(Clone, Debug)]
pub(crate) struct ResourceCopy {
    pub(crate) key: u64,
    pub(crate) kind: Kind,
    pub(crate) created_at: &'static Location<'static>,
    /// For a join wait (`join.rs`): the tokio id of the awaited task.
    pub(crate) target: Option<u64>,
    pub(crate) exclusive: Option<Hold>,
    /// The shared holds: those in slots, in slot order, then the list's.
    pub(crate) holds: Vec<Hold>,
    pub(crate) waits: Vec<Wait>,
    pub(crate) version: u64,
    /// What was seen of each shared slot, for the second pass.
    pub(crate) slots_seen: [SlotSeen; SHARED_SLOTS],
    /// Whether a shared slot could not be read whole (a hold being
    /// recorded): some task the copy does not name holds permits, so
    /// nobody waiting for the resource is known to be stuck.
    pub(crate) unsettled: bool,
}

/// One wrapped resource's records.
#[derive(Debug)]
pub(crate) struct Resource {
    /// Unique for the life of the process.
    pub(crate) key: u64,
    pub(crate) kind: Kind,
    pub(crate) created_at: &'static Location<'static>,
    registry: &'static Registry,
    pub(crate) exclusive: HoldSlot,
    /// The shared holds' slots: for the kinds that have shared holds
    /// (`RwLock`, `Semaphore`) only, so that a `Mutex` does not pay their
    /// bytes. A thin pointer, null for `None`, which
    /// debuggers read.
    pub(crate) shared: Option<Box<[SharedSlot; SHARED_SLOTS]>>,
    /// `lists` for debuggers.
    pub(crate) view: ListsView,
    lists: Mutex<Lists>,
}

impl Resource {
    /// A resource without an owner, unlisted with its last wait (the
    /// tests' and the models'), until [`Owner::new`] takes it.
    pub(crate) fn new(
        kind: Kind,
        created_at: &'static Location<'static>,
        registry: &'static Registry,
    ) -> Self {
        Resource {
            key: next_generation(),
            kind,
            created_at,
            registry,
            exclusive: HoldSlot::new(),
            shared: matches!(kind, Kind::RwLock | Kind::Semaphore)
                .then(|| Box::new(std::array::from_fn(|_| SharedSlot::new()))),
            view: ListsView::default(),
            lists: Mutex::new(Lists::default()),
        }
    }

    /// Changes one of the lists (locked by the caller) with `change`,
    /// keeping [`ListsView`] in step: the version made odd, then the
    /// change, then the list's pointer and length, then the next even
    /// version: four plain stores and a release fence (no instruction on
    /// x86), where a counter's one store stood before.
    #[inline]
    fn edit<R>(
        &self,
        lists: &mut Lists,
        edited: Edited,
        change: impl FnOnce(&mut Lists) -> R,
    ) -> R {
        use std::sync::atomic::{Ordering, fence};
        let view = &self.view;
        let version = view.version.load(Ordering::Relaxed);
        view.version.store(version + 1, Ordering::Relaxed);
        // The odd version before any write of the change.
        fence(Ordering::Release);
        let out = change(lists);
        match edited {
            Edited::Holds => {
                view.holds
                    .store(lists.holds.as_ptr().cast_mut(), Ordering::Relaxed);
                view.holds_len.store(lists.holds.len(), Ordering::Relaxed);
            }
            Edited::Waits => {
                view.waits
                    .store(lists.waits.as_ptr().cast_mut(), Ordering::Relaxed);
                view.waits_len.store(lists.waits.len(), Ordering::Relaxed);
            }
        }
        // Every write of the change before the even version.
        view.version.store(version + 2, Ordering::Release);
        out
    }

    /// Records a shared hold of `permits`; returns where. A free shared
    /// slot takes it if there is one (one compare-and-swap); else the
    /// list, under the resource's lock.
    #[inline]
    pub(crate) fn hold_shared(
        &self,
        task: u64,
        at: &'static Location<'static>,
        permits: u32,
    ) -> SharedPlace {
        let since_ms = stamp(task);
        if let Some(slots) = &self.shared {
            for (i, slot) in slots.iter().enumerate() {
                if slot.try_hold(task, at, since_ms, permits) {
                    return SharedPlace::Slot(i);
                }
            }
        }
        self.hold_listed(task, at, since_ms, permits)
    }

    /// [`Resource::hold_shared`] past the slots: out of line, so that the
    /// slots' path stays short.
    #[inline(never)]
    fn hold_listed(
        &self,
        task: u64,
        at: &'static Location<'static>,
        since_ms: u64,
        permits: u32,
    ) -> SharedPlace {
        let generation = next_generation();
        let hold = Hold {
            task,
            at,
            since_ms,
            generation,
            permits,
        };
        let mut lists = lock(&self.lists);
        self.edit(&mut lists, Edited::Holds, |l| l.holds.push(hold));
        SharedPlace::Listed(generation)
    }

    /// The shared slot `i`.
    fn slot(&self, i: usize) -> Option<&SharedSlot> {
        self.shared.as_deref().and_then(|slots| slots.get(i))
    }

    /// Ends the shared hold at `place`.
    #[inline]
    pub(crate) fn release_shared(&self, place: SharedPlace) {
        match place {
            SharedPlace::Slot(i) => {
                if let Some(slot) = self.slot(i) {
                    slot.release();
                }
            }
            SharedPlace::Listed(generation) => self.release_listed(generation),
        }
    }

    /// [`Resource::release_shared`] of a hold in the list: out of line.
    #[inline(never)]
    fn release_listed(&self, generation: u64) {
        self.edit_listed(generation, |holds, i| {
            holds.remove(i);
        });
    }

    /// Changes the shared hold `generation` of the list, if it is there,
    /// with `change` (given the list and its index) under the lock.
    fn edit_listed(&self, generation: u64, change: impl FnOnce(&mut Vec<Hold>, usize)) {
        let mut lists = lock(&self.lists);
        if let Some(i) = lists.holds.iter().position(|h| h.generation == generation) {
            self.edit(&mut lists, Edited::Holds, |l| change(&mut l.holds, i));
        }
    }

    /// Changes the permits of the shared hold at `place` (a permit split
    /// or merged).
    pub(crate) fn resize_shared(&self, place: SharedPlace, permits: u32) {
        match place {
            SharedPlace::Slot(i) => {
                if let Some(slot) = self.slot(i) {
                    slot.resize(permits);
                }
            }
            SharedPlace::Listed(generation) => {
                self.edit_listed(generation, |holds, i| holds[i].permits = permits);
            }
        }
    }

    /// Records a wait at the end of the queue; returns its generation.
    /// Lists the resource in the registry if it is not listed yet, and
    /// makes the waits keep it alive if it has no owner (see
    /// [`Registry`]).
    ///
    /// Only [`WaitRecord`] calls it, which keeps the resource's address
    /// and ends the wait when dropped.
    #[inline(always)]
    fn start_wait(
        self: &Arc<Self>,
        waiter: Waiter,
        at: Option<&'static Location<'static>>,
        ask: Ask,
    ) -> u64 {
        let generation = next_generation();
        let wait = Wait {
            task: waiter.task,
            at,
            ask,
            since_ms: stamp(waiter.task),
            generation,
            awaiting: waiter.awaiting,
            path: waiter.path,
        };
        let mut lists = lock(&self.lists);
        if lists.index.is_none() {
            // Resource lock, then registry lock: `detect` never holds the
            // registry's while taking a resource's.
            lists.index = Some(self.registry.list(self));
        }
        if !lists.owned && !lists.kept {
            // The first wait of a resource without an owner (the tests',
            // or an owned acquire future first polled after its lock was
            // dropped): the waits keep it alive from now on.
            std::mem::forget(Arc::clone(self));
            lists.kept = true;
        }
        self.edit(&mut lists, Edited::Waits, |l| l.waits.push(wait));
        generation
    }

    /// Ends the wait `generation`. After the last, the resource is
    /// unlisted if its owner is gone (or it never had one). Returns
    /// whether the waits gave up the strong reference they kept, which
    /// the caller must then release (after this call: see
    /// [`WaitRecord`]'s drop).
    #[inline]
    #[must_use]
    fn end_wait(&self, generation: u64) -> bool {
        let mut lists = lock(&self.lists);
        let Some(i) = lists.waits.iter().position(|w| w.generation == generation) else {
            return false;
        };
        // The first-and-last wait is the last in the queue: no move.
        if i + 1 == lists.waits.len() {
            self.edit(&mut lists, Edited::Waits, |l| l.waits.pop());
        } else {
            self.edit(&mut lists, Edited::Waits, |l| l.waits.remove(i));
        }
        if lists.waits.is_empty() && !lists.owned {
            self.unlist(&mut lists);
            return std::mem::replace(&mut lists.kept, false);
        }
        false
    }

    /// The wait `generation` is now `task`'s (see [`WaitRecord::follow`]).
    fn move_wait(&self, generation: u64, waiter: Waiter) {
        let mut lists = lock(&self.lists);
        if let Some(i) = lists.waits.iter().position(|w| w.generation == generation) {
            self.edit(&mut lists, Edited::Waits, |l| {
                let w = &mut l.waits[i];
                w.task = waiter.task;
                w.awaiting = waiter.awaiting;
                w.path = waiter.path;
                if w.since_ms == 0 {
                    w.since_ms = stamp(waiter.task);
                }
            });
        }
    }

    /// The owner's end: unlists the resource unless waits are left, whose
    /// last will. Those waits then keep the resource alive: the owner's
    /// strong reference is left to them (see [`Registry`]).
    fn disown(self: &Arc<Self>) {
        let mut lists = lock(&self.lists);
        lists.owned = false;
        if lists.waits.is_empty() {
            self.unlist(&mut lists);
        } else if !lists.kept {
            std::mem::forget(Arc::clone(self));
            lists.kept = true;
        }
    }

    /// Unlists the resource if it is listed (its lists locked by the
    /// caller: resource lock, then registry lock).
    fn unlist(&self, lists: &mut Lists) {
        if let Some(index) = lists.index.take() {
            self.registry.unlist(index);
        }
    }

    /// Copies the records: the exclusive hold, the shared slots, then
    /// the lists under the resource's lock.
    pub(crate) fn copy(&self) -> ResourceCopy {
        let exclusive = self.exclusive.read();
        let mut holds = Vec::new();
        let mut slots_seen = [SlotSeen::default(); SHARED_SLOTS];
        let mut unsettled = false;
        if let Some(slots) = &self.shared {
            for (slot, seen) in slots.iter().zip(&mut slots_seen) {
                let (read, now) = slot.read();
                *seen = now;
                match read {
                    SlotRead::Free => {}
                    SlotRead::Held(hold) => holds.push(hold),
                    SlotRead::Unsettled => unsettled = true,
                }
            }
        }
        let lists = lock(&self.lists);
        holds.extend_from_slice(&lists.holds);
        ResourceCopy {
            key: self.key,
            kind: self.kind,
            created_at: self.created_at,
            target: None,
            exclusive,
            holds,
            waits: lists.waits.clone(),
            version: self.view.version.load(std::sync::atomic::Ordering::Relaxed),
            slots_seen,
            unsettled,
        }
    }

    /// Whether the records are still those of `seen`: same version, same
    /// exclusive hold, same shared slots.
    pub(crate) fn unchanged(&self, seen: &ResourceCopy) -> bool {
        let version = {
            let _lists = lock(&self.lists);
            self.view.version.load(std::sync::atomic::Ordering::Relaxed)
        };
        let was = seen.exclusive.map_or(0, |h| h.generation);
        let slots = self.shared.as_deref().map_or(&[][..], |s| &s[..]);
        version == seen.version
            && self.exclusive.generation() == was
            && slots
                .iter()
                .zip(seen.slots_seen)
                .all(|(slot, seen)| slot.unchanged(seen))
    }
}

/// The registry's raw addresses rest on this (see [`Registry`]): checked
/// where it costs nothing that ships.
#[cfg(any(debug_assertions, async_stack_loom))]
impl Drop for Resource {
    fn drop(&mut self) {
        assert!(
            lock(&self.lists).index.is_none(),
            "a resource was freed while listed in the waits registry"
        );
    }
}

/// What holds a resource for its whole life: a wrapper (`Mutex`,
/// `RwLock`, `Semaphore`). Derefs to the resource's
/// `Arc`, which the wrapper clones for its owned futures and guards.
///
/// While the owner lives, its resource stays listed in the registry from
/// its first wait on, so that a lock that is contended now and then pays
/// the registry's lock once, not twice per wait. Dropping the owner
/// unlists the resource, or leaves that to its last wait if waits are
/// left (an owned acquire future, or one leaked, can outlive the owner).
#[derive(Debug)]
pub(crate) struct Owner(Arc<Resource>);

impl Owner {
    /// Owns `resource` (new, so not listed yet).
    pub(crate) fn new(mut resource: Resource) -> Self {
        match resource.lists.get_mut() {
            Ok(lists) => lists.owned = true,
            Err(poisoned) => poisoned.into_inner().owned = true,
        }
        Owner(Arc::new(resource))
    }
}

impl std::ops::Deref for Owner {
    type Target = Arc<Resource>;

    fn deref(&self) -> &Arc<Resource> {
        &self.0
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // Before this `Arc` goes: see `Registry`.
        self.0.disown();
    }
}

/// A recorded wait, ended when dropped: what an acquire future keeps
/// from its first `Pending` to its end (an awaited `JoinHandle` keeps a
/// `JoinWait` instead, see `join.rs`).
///
/// It keeps the resource's address, not an `Arc`: while its wait is in
/// the resource's list, the resource is alive (owned, or kept by its
/// waits: see [`Registry`]), and the wait stays there until this record
/// ends it. That saves every wait two atomic read-modify-writes of the
/// reference count.
#[derive(Debug)]
pub(crate) struct WaitRecord {
    /// From `Arc::as_ptr`.
    resource: NonNull<Resource>,
    generation: u64,
    /// The waiter, as recorded.
    waiter: Waiter,
}

// SAFETY: a record only reads its resource through a shared reference
// (`end_wait` takes the resource's lock), and `Resource` is `Send` and
// `Sync`; the address stays valid on any thread (see the type's docs).
unsafe impl Send for WaitRecord {}
// SAFETY: `&WaitRecord` gives no access to the resource at all.
unsafe impl Sync for WaitRecord {}

impl WaitRecord {
    /// Records a wait of `waiter` for `resource`.
    #[inline]
    pub(crate) fn start(
        resource: &Arc<Resource>,
        waiter: Waiter,
        at: Option<&'static Location<'static>>,
        ask: Ask,
    ) -> Self {
        WaitRecord {
            generation: resource.start_wait(waiter, at, ask),
            resource: NonNull::from(&**resource),
            waiter,
        }
    }

    /// Makes the wait `waiter`'s if it is another's: the acquire future
    /// was moved to (and polled by) another task since it started
    /// waiting, or polled at another `.await`. Its place in the queue
    /// stays.
    #[inline]
    pub(crate) fn follow(&mut self, waiter: Waiter) {
        if self.waiter != waiter {
            self.move_to(waiter);
        }
    }

    #[cold]
    #[inline(never)]
    fn move_to(&mut self, waiter: Waiter) {
        // SAFETY: as in `end`: the wait is still listed, so the resource
        // is alive.
        let resource = unsafe { self.resource.as_ref() };
        resource.move_wait(self.generation, waiter);
        self.waiter = waiter;
    }

    /// Ends the wait: out of line, so that dropping an `Option` of a
    /// record that is `None` (the uncontended acquire) costs one test.
    #[inline(never)]
    fn end(&self) {
        // SAFETY: this record's wait is still in the resource's list (only
        // this drop removes it), so the resource is alive: its owner has
        // not let its `Arc` go yet (it does so only after `disown`, which
        // leaves its reference to the waits if any is left), or the waits
        // keep a reference (see `Registry`).
        let resource = unsafe { self.resource.as_ref() };
        if resource.end_wait(self.generation) {
            // SAFETY: `end_wait` gave up the reference the waits kept
            // (leaked by `start_wait` or `disown` from an `Arc` of this
            // resource), which is released here, once. Nothing touches the
            // resource after this line: it may be freed by it.
            unsafe { Arc::decrement_strong_count(self.resource.as_ptr()) };
        }
    }
}

impl Drop for WaitRecord {
    #[inline]
    fn drop(&mut self) {
        self.end();
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

/// The most resources that debuggers see listed at once (the slots of
/// the registry's page table; more are listed all the same, but only the
/// first this many indices have a slot).
#[cfg(not(async_stack_loom))]
pub(crate) const LISTED_CAPACITY: usize = MAX_TASKS.div_ceil(PAGE) * PAGE;

/// The page table of the process's registry's slots, and how many slots
/// were handed out: statics, so that the debug descriptor holds their
/// addresses from the start.
#[cfg(not(async_stack_loom))]
pub(crate) static LISTED_PAGES: [AtomicPtr<ListedSlot>; LISTED_CAPACITY / PAGE] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; LISTED_CAPACITY / PAGE];
#[cfg(not(async_stack_loom))]
pub(crate) static LISTED_COUNT: crate::shim::AtomicUsize = crate::shim::AtomicUsize::new(0);

/// The most join waits at once that have a slot (one more waits
/// unrecorded): as many as the resources debuggers see listed.
#[cfg(not(async_stack_loom))]
pub(crate) const JOIN_CAPACITY: usize = LISTED_CAPACITY;

/// The page table of the join waits' slots and how many were handed out
/// (see `join.rs`), for the debug descriptor.
#[cfg(not(async_stack_loom))]
pub(crate) static JOIN_PAGES: [AtomicPtr<JoinSlot>; JOIN_CAPACITY / PAGE] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; JOIN_CAPACITY / PAGE];
#[cfg(not(async_stack_loom))]
pub(crate) static JOIN_COUNT: crate::shim::AtomicUsize = crate::shim::AtomicUsize::new(0);

/// A slot of the registry's page table: the address of a listed resource,
/// or null.
#[cfg(not(async_stack_loom))]
pub(crate) type ListedSlot = AtomicPtr<Resource>;

/// The resources that have waits, and those that had some and whose
/// [`Owner`] lives.
///
/// # Listing
///
/// A resource is listed at its first wait, and stays listed while it has
/// a wait *or* its owner lives: it is unlisted by the owner's drop if no
/// wait is left, else by the end of its last wait. (A resource without
/// an owner, as in the tests, is unlisted with its last wait.) Both
/// checks are made under the resource's lock, which orders them, and
/// take this registry's lock after it. So a lock that is contended now
/// and then takes this lock twice in its life, not twice per wait; and
/// the registry holds at most one index per live resource that ever had
/// a wait.
///
/// Each listed resource has an index, reused once it is unlisted. The
/// in-process readers read the resources under the lock; debuggers read
/// slot `index` of `slots`, which holds the resource's address while it
/// is listed (for indices below the slots' capacity). Both change under
/// the lock.
///
/// A listed resource with no wait shows nothing. Readers have two fast
/// paths: [`is_empty`], one load of `count`, while nothing is listed;
/// and [`has_waits`], which skips an idle listed resource with one load of
/// its waits' length, without its lock. A count of the resources that
/// have waits would make the first hold for a process whose locks are
/// idle too, but it costs each first and last wait an atomic
/// read-modify-write, which measured about 8 ns each (see BENCHMARKS.md,
/// 2026-11-27 "unlisting lazily"): the wait path is paid at every
/// contended wait, the readers' walk only by a diagnostic call.
///
/// # Why the raw addresses are sound
///
/// Neither the registry nor a [`WaitRecord`] holds a reference count of
/// its own. Under a resource's lock, *listed* implies *owned or has a
/// wait*, and *has a wait* implies *owned or kept*, where *kept* means
/// that the waits hold one strong reference of the resource's `Arc`
/// (counted, but held by no `Arc` value):
///
/// - the [`Owner`] holds an `Arc`, and clears `owned` before it lets it
///   go: if no wait is left it unlists the resource, else it leaves its
///   reference to the waits (*kept*, if they did not keep one already);
/// - the first wait of a resource without an owner takes a reference for
///   the waits (*kept*);
/// - the end of the last wait of a resource without an owner unlists it
///   and clears *kept*, and only then, with the lock released, its
///   record releases that reference.
///
/// So, under this lock, every listed resource and every resource with a
/// wait is alive: [`listed`] takes its references there, and a record
/// reaches its resource through a plain address until it ends its wait.
/// A leaked owner leaks its `Arc`, and a leaked wait record its wait,
/// so that resource stays alive (and listed) for good. No wait of an
/// owned resource touches the reference count (a record that held an
/// `Arc` cost two atomic read-modify-writes per wait). Builds with debug
/// assertions (and the loom models) check, when a resource is freed, that
/// it is not listed.
///
/// [`listed`]: Registry::listed
/// [`is_empty`]: Registry::is_empty
/// [`has_waits`]: has_waits
pub(crate) struct Registry {
    listed: Mutex<Listed>,
    /// How many resources are listed: written only under `listed`'s lock
    /// (a load and a store), read without it by [`is_empty`] (`Relaxed`:
    /// a reader that a wait's start happens before sees it counted).
    ///
    /// [`is_empty`]: Registry::is_empty
    count: AtomicUsize,
    /// Not under loom: no model reads them.
    #[cfg(not(async_stack_loom))]
    slots: Arena<ListedSlot>,
    /// The join waits' slots (see `join.rs`).
    joins: Arena<JoinSlot>,
}

/// The listed resources, under the registry's lock.
#[derive(Default)]
struct Listed {
    /// By index, from `Arc::as_ptr`; null for a free index.
    resources: Vec<*const Resource>,
    /// The free indices.
    free: Vec<usize>,
}

// SAFETY: the addresses are of `Resource`s, which are `Send` and `Sync`;
// they are only dereferenced under the registry's lock, while each is
// kept alive by its owner or by its waits (see [`Registry`]).
unsafe impl Send for Listed {}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("listed", &self.count.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry of its own (the tests'), whose slots are in a page
    /// table of their own.
    #[cfg(any(test, async_stack_loom))]
    pub(crate) fn new() -> Self {
        Registry {
            listed: Mutex::new(Listed::default()),
            count: AtomicUsize::new(0),
            #[cfg(not(async_stack_loom))]
            slots: Arena::new(2 * PAGE, empty_slot),
            joins: Arena::new(2 * PAGE, JoinSlot::new),
        }
    }

    /// The process's registry, whose slots the debug descriptor names.
    #[cfg(not(async_stack_loom))]
    pub(crate) fn global() -> &'static Registry {
        static GLOBAL: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(|| Registry {
            listed: Mutex::new(Listed::default()),
            count: AtomicUsize::new(0),
            slots: Arena::with_pages(&LISTED_PAGES, &LISTED_COUNT, LISTED_CAPACITY, empty_slot),
            joins: Arena::with_pages(&JOIN_PAGES, &JOIN_COUNT, JOIN_CAPACITY, JoinSlot::new),
        })
    }

    /// The join waits' slots.
    pub(crate) fn joins(&self) -> &Arena<JoinSlot> {
        &self.joins
    }

    /// Lists `resource` (which has no index); returns its index.
    fn list(&self, resource: &Arc<Resource>) -> usize {
        let mut listed = lock(&self.listed);
        let index = match listed.free.pop() {
            Some(index) => index,
            None => {
                listed.resources.push(std::ptr::null());
                // Handed out in order, under this lock: slot `i` is index
                // `i` (none past the capacity).
                #[cfg(not(async_stack_loom))]
                let _ = self.slots.fresh();
                listed.resources.len() - 1
            }
        };
        listed.resources[index] = Arc::as_ptr(resource);
        self.count
            .store(self.count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        #[cfg(not(async_stack_loom))]
        self.mirror(index, Arc::as_ptr(resource).cast_mut());
        index
    }

    /// Unlists the resource at `index`.
    fn unlist(&self, index: usize) {
        let mut listed = lock(&self.listed);
        #[cfg(not(async_stack_loom))]
        self.mirror(index, std::ptr::null_mut());
        let Some(slot) = listed.resources.get_mut(index) else {
            return;
        };
        if std::mem::replace(slot, std::ptr::null()).is_null() {
            return;
        }
        listed.free.push(index);
        self.count
            .store(self.count.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
    }

    /// Writes the slot of `index`, if it has one.
    #[cfg(not(async_stack_loom))]
    fn mirror(&self, index: usize, resource: *mut Resource) {
        if index < self.slots.len()
            && let Some(slot) = self.slots.get(index)
        {
            slot.store(resource, Ordering::Release);
        }
    }

    /// The listed resources, in order of creation (the same order at every
    /// run, which the loom models need).
    pub(crate) fn listed(&self) -> Vec<Arc<Resource>> {
        by_creation(self.collect(|_| true))
    }

    /// The listed resources that have waits (see [`has_waits`]), in order
    /// of creation: those [`Registry::copies`] copies.
    #[cfg(test)]
    pub(crate) fn waited(&self) -> Vec<Arc<Resource>> {
        by_creation(self.collect(has_waits))
    }

    /// The listed resources that `keep` keeps, in the order of the list
    /// (which reuses freed places): see [`by_creation`].
    fn collect(&self, keep: impl Fn(&Resource) -> bool) -> Vec<Arc<Resource>> {
        let listed = lock(&self.listed);
        listed
            .resources
            .iter()
            .filter(|p| !p.is_null())
            .filter_map(|&p| {
                // SAFETY: `p` is from `Arc::as_ptr` of a listed resource,
                // read under the registry's lock: its owner holds an `Arc`
                // of it, or its waits keep a strong reference, and
                // whichever lets the last of those go unlists it first,
                // which takes this lock (see `Registry`). So it is alive,
                // its count is at least one, and the new reference is the
                // one `from_raw` takes over.
                unsafe {
                    if !keep(&*p) {
                        return None;
                    }
                    Arc::increment_strong_count(p);
                    Some(Arc::from_raw(p))
                }
            })
            .collect()
    }

    /// Copies of every resource that has waits and of every join wait,
    /// in order of creation (a join wait's: its start), each with what
    /// a second pass compares it against.
    pub(crate) fn copies(&self) -> Vec<(Waited, ResourceCopy)> {
        // Sorted once, with the join waits, below.
        let mut out: Vec<(Waited, ResourceCopy)> = self
            .collect(has_waits)
            .into_iter()
            .map(|r| {
                let copy = r.copy();
                (Waited::Listed(r), copy)
            })
            .collect();
        for slot in self.joins.handed_out() {
            if let Some(read) = slot.read() {
                out.push((Waited::Join(slot), join_copy(read)));
            }
        }
        out.sort_by_key(|(_, copy)| copy.key);
        out
    }

    /// Whether nothing is listed and no join wait ever started, so that
    /// nothing waits: two loads, the readers' fast path.
    pub(crate) fn is_empty(&self) -> bool {
        self.count.load(Ordering::Relaxed) == 0 && self.joins.len() == 0
    }
}

/// Whether a listed resource has waits: what the in-process readers go
/// through. A lock that was contended once stays listed while it lives,
/// idle (see [`Registry`]); this skips it with one load of its waits'
/// length (the debuggers' copy, kept under its lock), where a copy of it
/// would take its lock and clone its lists. A wait that starts meanwhile
/// may be missed, as if the reader had come just before it.
fn has_waits(r: &Resource) -> bool {
    r.view.waits_len.load(std::sync::atomic::Ordering::Relaxed) != 0
}

/// `resources` in order of creation (keys are unique, so an unstable sort
/// gives that one order).
fn by_creation(mut resources: Vec<Arc<Resource>>) -> Vec<Arc<Resource>> {
    resources.sort_unstable_by_key(|r| r.key);
    resources
}

/// A join wait read whole, copied as a `JoinHandle` resource with that
/// one wait: its key the wait's generation, from the counter that numbers
/// resources too, so that copies sort in order of creation.
fn join_copy(read: JoinRead) -> ResourceCopy {
    ResourceCopy {
        key: read.generation,
        kind: Kind::JoinHandle,
        created_at: read.spawned_at,
        target: (read.target != 0).then_some(read.target),
        exclusive: None,
        holds: Vec::new(),
        waits: vec![Wait {
            task: read.task,
            at: None,
            ask: Ask::Finish,
            since_ms: read.since_ms,
            generation: read.generation,
            awaiting: read.awaiting,
            path: read.path,
        }],
        version: 0,
        slots_seen: [SlotSeen::default(); SHARED_SLOTS],
        unsettled: false,
    }
}

/// What a copy in [`Registry::copies`] was read from.
#[derive(Debug)]
pub(crate) enum Waited {
    Listed(Arc<Resource>),
    Join(&'static JoinSlot),
}

impl Waited {
    /// Whether the records are still those `seen` copied.
    pub(crate) fn unchanged(&self, seen: &ResourceCopy) -> bool {
        match self {
            Waited::Listed(r) => r.unchanged(seen),
            Waited::Join(slot) => slot.holds(seen.key),
        }
    }
}

/// For the tests and the debugger-script tests' hooks (`debug::testing`).
#[cfg(not(async_stack_loom))]
impl Resource {
    /// Claims the shared slot `i` and writes nothing, as a holder
    /// preempted right after its claim would leave it; whether it was
    /// free. [`Resource::release_shared`] frees it.
    pub(crate) fn claim_only(&self, i: usize) -> bool {
        self.slot(i).is_some_and(SharedSlot::claim)
    }
}

#[cfg(all(test, not(async_stack_loom)))]
impl Registry {
    /// Whether the resource at `resource` is listed.
    pub(crate) fn lists(&self, resource: *const Resource) -> bool {
        lock(&self.listed).resources.contains(&resource)
    }

    /// What the slots handed out hold, as a debugger reads them (null: a
    /// free index).
    pub(crate) fn slots(&self) -> Vec<*const Resource> {
        (0..self.slots.len())
            .map(|i| {
                self.slots
                    .get(i)
                    .map_or(std::ptr::null(), |s| s.load(Ordering::Relaxed).cast_const())
            })
            .collect()
    }
}

/// A free slot.
#[cfg(not(async_stack_loom))]
fn empty_slot() -> ListedSlot {
    AtomicPtr::new(std::ptr::null_mut())
}
