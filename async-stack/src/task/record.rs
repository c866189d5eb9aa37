//! The **task record**: everything another thread may read about one task,
//! in two cache lines that are never freed.
//!
//! A record is 128 bytes, aligned to a cache line, so that two tasks polled
//! on two threads never write the same line. The first line holds what a
//! task root writes on every poll and what its waker touches; the second
//! holds what the task was spawned with and the task's published stack
//! (see [`crate::task::stack`]), whose first three slots live inline, so
//! that the usual short stack costs no more memory. Deeper stacks take
//! chunks from a pool that is never freed either
//! ([`crate::task::registry`]). A task's name, which few tasks have, is in
//! its extension ([`TaskExt`]).
//!
//! # Layout and who writes what
//!
//! | offset | field | written by |
//! |---:|---|---|
//! | 0 | `id`: the task's id, `0` while no task lives here | the registering thread, then the thread that ends the task |
//! | 8 | `state`: running / idle / scheduled, since when, and the wake count the last poll started from (see [`state`]) | the polling thread (plain stores) |
//! | 16 | `polls` | the polling thread |
//! | 24 | `wakes`: wakes from outside the task's poll, and the time of the first one since the last poll started | wakers, by compare-and-swap |
//! | 32 | `current`: the frame being polled right now, its slot in the top bits (see [`crate::record::current`]) | the polling thread, on every entry and exit of a frame |
//! | 40 | `waker_data`, 48 `waker_vtable`: the executor's waker, forwarded to by the task's own waker (its data pointer, and its vtable as an id in [`vtables`]; or a boxed waker, see [`vtables::BOXED`]) | the registering thread, while no waker refers to the record |
//! | 52 | `refs`: one for the live task, one per waker of it, exact up to [`refs::MAX`] (see [`refs`]) | wakers (read-modify-write) |
//! | 56 | `self_wakes`: wakes from inside the task's own polls | the polling thread |
//! | 64 | `parent`: the id of the task that spawned this one, `0` if unknown | the registering thread |
//! | 72 | `spawn`: where the task was spawned, and whether it has a name or a fallback waker (see [`spawn`]) | the registering thread; the polling thread when it makes a fallback waker |
//! | 76 | `seq`, 80 `foreign`, 88 `meta`, 96 `births`, 100 `chunk`, 104 `slots` | the published stack's (see [`crate::task::stack`]) |
//!
//! # Incarnations and recycling
//!
//! A record holds one task at a time. Each task it holds is an
//! *incarnation*, numbered from 1 in the `foreign` word; frames name their
//! place by record index and incarnation, so a frame that outlives its task
//! can never touch the next task's stack. A record whose incarnation
//! counter is exhausted is retired, never handed out again, so numbers are
//! never reused. A record returns to the free list only when its task has
//! ended *and* the last waker that refers to it is dropped (`refs` reaches
//! zero): a waker therefore always refers to the task it was made for. A
//! count that would pass [`refs::MAX`] (only forgotten wakers get there)
//! sticks instead of wrapping, and the record is then never recycled.
//!
//! # The executor's waker
//!
//! The record keeps the waker of the executor that first polled its task,
//! which the task's own waker forwards every wake to, whatever executors
//! the process runs: in 12 bytes (data pointer and interned vtable id)
//! when its vtable is one of the first [`vtables::MAX`] the process saw,
//! and otherwise whole, in a box allocated once per task. So a clone of
//! the task's waker, made at any poll, reaches that executor.
//!
//! # Reading a record
//!
//! [`TaskRecord::read`] copies a record as one instant: the id, the state
//! word, the poll count, the published stack and the running frame, taken
//! between two loads of the stack's sequence counter, of the `foreign` word,
//! of `polls` and of `state`, and retried when any of them moved. The poll
//! count is the version: a task's poll starts by writing `state`, then
//! `polls`, and only then `current`, and ends by clearing `current` before
//! writing `state` (with fences in between); readers load `polls` before
//! `state`. So a copy never pairs an idle task with a running frame, even
//! when two polls in a row end in the same idle word (same millisecond, no
//! wake), which the state alone cannot tell apart.

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::task::Waker;

use crate::record::current;
use crate::record::frame::AsyncStackFrame;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};
use crate::task::TaskState;
use crate::task::stack::{self, StackCopy, Torn, foreign};

/// The packed `state` word.
///
/// | bits | field |
/// |---|---|
/// | 0..2 | state: [`IDLE`], [`SCHEDULED`] or [`RUNNING`] |
/// | 2..24 | the low 22 bits of the wake count when the last poll started |
/// | 24..64 | the time of the last change, in ms since the clock's origin |
pub(crate) mod state {
    /// Suspended and not woken since.
    pub(crate) const IDLE: u64 = 0;
    /// Registered and not polled yet, or woken from inside its own last
    /// poll (a yield).
    pub(crate) const SCHEDULED: u64 = 1;
    /// Inside a poll.
    pub(crate) const RUNNING: u64 = 2;

    pub(crate) const SEEN_BITS: u32 = 22;
    pub(crate) const SEEN_MASK: u64 = (1 << SEEN_BITS) - 1;
    pub(crate) const SEEN_SHIFT: u32 = 2;
    pub(crate) const TIME_SHIFT: u32 = 24;

    /// Packs a state word.
    #[inline(always)]
    pub(crate) fn pack(state: u64, seen: u64, since_ms: u64) -> u64 {
        (since_ms << TIME_SHIFT) | ((seen & SEEN_MASK) << SEEN_SHIFT) | (state & 0b11)
    }

    /// `(state, seen, since_ms)`.
    #[inline(always)]
    pub(crate) fn unpack(word: u64) -> (u64, u64, u64) {
        (
            word & 0b11,
            (word >> SEEN_SHIFT) & SEEN_MASK,
            word >> TIME_SHIFT,
        )
    }
}

/// The packed `wakes` word: `[woken_ms: 24][count: 40]`, the number of wakes
/// from outside the task's polls, and the low 24 bits of the time (ms) of
/// the first one after the last poll started.
pub(crate) mod wakes {
    pub(crate) const COUNT_BITS: u32 = 40;
    pub(crate) const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
    pub(crate) const WOKEN_BITS: u32 = 24;
    const WOKEN_MASK: u64 = (1 << WOKEN_BITS) - 1;

    #[inline(always)]
    pub(crate) fn count(word: u64) -> u64 {
        word & COUNT_MASK
    }

    #[inline(always)]
    pub(crate) fn woken_low(word: u64) -> u64 {
        word >> COUNT_BITS
    }

    /// `word` with one more wake, stamped `now_ms` if `first`.
    #[inline(always)]
    pub(crate) fn add(word: u64, first: bool, now_ms: u64) -> u64 {
        let count = (count(word) + 1) & COUNT_MASK;
        let woken = if first {
            now_ms & WOKEN_MASK
        } else {
            woken_low(word)
        };
        (woken << COUNT_BITS) | count
    }

    /// The full time of a wake stamped `low`, the latest one not after
    /// `now_ms` (exact for wakes less than about 4.6 hours old).
    #[inline]
    pub(crate) fn woken_ms(low: u64, now_ms: u64) -> u64 {
        now_ms - (now_ms.wrapping_sub(low) & WOKEN_MASK).min(now_ms)
    }
}

/// The packed `spawn` word: `[named: 1][fallback: 1][unused: 6][site: 24]`.
/// `site` is the interned call-site id (see [`crate::record::site`]) of
/// the spawn call that started the task, `0` if it was not started
/// through a spawn helper; `named` is set while the task's [`TaskExt`]
/// holds a name, `fallback` once it may hold a fallback waker (so that
/// the end of a task without either skips its extension).
pub(crate) mod spawn {
    use crate::record::site::SITE_ID_BITS;

    pub(crate) const SITE_MASK: u32 = (1 << SITE_ID_BITS) - 1;
    pub(crate) const NAMED: u32 = 1 << 31;
    pub(crate) const FALLBACK: u32 = 1 << 30;

    #[inline]
    pub(crate) fn pack(site: u32, named: bool) -> u32 {
        (site & SITE_MASK) | if named { NAMED } else { 0 }
    }

    #[inline]
    pub(crate) fn site(word: u32) -> u32 {
        word & SITE_MASK
    }

    #[inline]
    pub(crate) fn named(word: u32) -> bool {
        word & NAMED != 0
    }

    /// Whether the task's extension may hold something: a name or a
    /// fallback waker.
    #[inline]
    pub(crate) fn has_ext(word: u32) -> bool {
        word & (NAMED | FALLBACK) != 0
    }
}

/// The `refs` count of a record: one for the live task, one per waker of
/// it (and one per fallback waker, see [`crate::task::waker`]).
///
/// Exact up to [`MAX`], which no program reaches except by forgetting
/// wakers (`mem::forget`: 2^31 of them, some 15 s of safe code). A
/// count that would pass `MAX` *sticks*: it is set to [`STUCK`], halfway
/// between `MAX` and the wrap, and every later increment or decrement that
/// sees it above `MAX` sets it back there. So it never wraps to a small
/// count, the record is never recycled, and each waker of it keeps waking
/// the executor of the task it was made for. The record (128 bytes) and
/// the executor's waker are kept for the rest of the process: where `Arc`
/// aborts the process, a library inside a production process leaks one
/// record.
///
/// Between the increment or decrement that sees a count above `MAX` and
/// its store of `STUCK`, other threads may move the count, each by at
/// most one per waker operation in flight. Reaching `0` from above `MAX`,
/// or wrapping from `STUCK`, would take 2^30 of them at once.
pub(crate) mod refs {
    /// The largest exact count.
    pub(crate) const MAX: u32 = i32::MAX as u32;
    /// A count that passed [`MAX`]: `0xC000_0000`.
    pub(crate) const STUCK: u32 = 3 << 30;
}

/// The interned vtables of executors' wakers. A record keeps its task's
/// executor waker as the waker's data pointer and the index + 1 of its
/// vtable here, in 12 bytes instead of 16; a process sees one vtable or
/// two (tokio has one). Entries are appended, never changed or removed.
/// A waker whose vtable finds the table full is kept boxed instead (id
/// [`BOXED`]).
pub(crate) mod vtables {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicPtr, Ordering};
    use std::task::RawWakerVTable;

    /// The most vtables interned.
    pub(crate) const MAX: usize = 64;

    /// The vtable id of a record whose executor waker is boxed: its data
    /// pointer is then a `Box<Waker>`'s. No interned vtable has this id
    /// ([`get`] gives `None` for it).
    pub(crate) const BOXED: u32 = u32::MAX;

    /// An append-only table of up to `N` vtables.
    pub(crate) struct Table<const N: usize> {
        entries: [AtomicPtr<RawWakerVTable>; N],
        append: Mutex<()>,
    }

    impl<const N: usize> Table<N> {
        pub(crate) const fn new() -> Self {
            Table {
                entries: [const { AtomicPtr::new(std::ptr::null_mut()) }; N],
                append: Mutex::new(()),
            }
        }

        /// The id (index + 1) of `vtable`, interning it if it is new;
        /// `None` when the table is full.
        pub(crate) fn id(&self, vtable: &'static RawWakerVTable) -> Option<u32> {
            let wanted = std::ptr::from_ref(vtable).cast_mut();
            // The entry holding `wanted`, or else the first free one.
            let find = || {
                self.entries.iter().enumerate().find_map(|(i, e)| {
                    let p = e.load(Ordering::Acquire);
                    (p == wanted || p.is_null()).then_some((i, p))
                })
            };
            if let Some((i, p)) = find()
                && p == wanted
            {
                return Some(i as u32 + 1);
            }
            let _append = self.append.lock().unwrap_or_else(|e| e.into_inner());
            let (i, p) = find()?;
            if p.is_null() {
                self.entries[i].store(wanted, Ordering::Release);
            }
            Some(i as u32 + 1)
        }

        /// The vtable of id `id`, if it was interned.
        #[inline(always)]
        pub(crate) fn get(&self, id: u32) -> Option<&'static RawWakerVTable> {
            let p = self
                .entries
                .get(id.checked_sub(1)? as usize)?
                .load(Ordering::Acquire);
            // SAFETY: a non-null entry was stored from a `&'static
            // RawWakerVTable` and never changes.
            unsafe { p.as_ref() }
        }
    }

    static TABLE: Table<MAX> = Table::new();

    /// The process's id of `vtable` (see [`Table::id`]).
    pub(crate) fn id(vtable: &'static RawWakerVTable) -> Option<u32> {
        TABLE.id(vtable)
    }

    /// The process's vtable of id `id` (see [`Table::get`]).
    #[inline(always)]
    pub(crate) fn get(id: u32) -> Option<&'static RawWakerVTable> {
        TABLE.get(id)
    }

    #[cfg(all(test, not(async_stack_loom)))]
    mod tests {
        use std::task::{RawWaker, RawWakerVTable};

        use super::Table;

        fn noop(_: *const ()) {}
        fn clone(p: *const ()) -> RawWaker {
            RawWaker::new(p, &A)
        }
        static A: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
        static B: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
        static C: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);

        #[test]
        fn vtables_are_interned_once_each_until_the_table_is_full() {
            let t: Table<2> = Table::new();
            assert_eq!(t.get(0), None);
            assert_eq!(t.get(1), None, "nothing interned yet");
            assert_eq!(t.id(&A), Some(1));
            assert_eq!(t.id(&B), Some(2));
            assert_eq!(t.id(&A), Some(1), "the same vtable, the same id");
            assert_eq!(t.id(&C), None, "full");
            assert!(std::ptr::eq(t.get(1).unwrap(), &A));
            assert!(std::ptr::eq(t.get(2).unwrap(), &B));
            assert_eq!(t.get(3), None);
            assert_eq!(t.get(u32::MAX), None);
        }
    }
}

/// A part of the executor's waker of a task, kept in its record: its data
/// pointer, or its vtable id (see [`vtables`]).
///
/// Written only while no waker refers to the record (at registration, when
/// `refs` goes from 0 to 1), taken only when the last reference goes
/// (`refs` back to 0), and read in between. So no access overlaps a write.
pub(crate) struct WakerPart<T>(UnsafeCell<T>);

// SAFETY: the cell is written and taken only by the thread that holds the
// record's only reference (see the type's docs); every other access is a
// shared read; and the waker it is part of is `Send` and `Sync`.
unsafe impl<T> Sync for WakerPart<T> {}

impl<T> WakerPart<T> {
    const fn new(value: T) -> Self {
        WakerPart(UnsafeCell::new(value))
    }

    /// # Safety
    ///
    /// Per the type's docs: a read holds a reference counted in `refs`.
    #[inline(always)]
    unsafe fn read(&self) -> T
    where
        T: Copy,
    {
        // SAFETY: not written while a reference is held.
        unsafe { *self.0.get() }
    }

    /// # Safety
    ///
    /// Per the type's docs: `refs` is 0 and this thread owns the record.
    unsafe fn write(&self, value: T) {
        // SAFETY: exclusive access, per the caller's obligations.
        unsafe { *self.0.get() = value };
    }
}

/// One task's record. 128 bytes, aligned to a cache line; `#[repr(C)]` for
/// debugger scripts. See the module docs for who writes each field.
#[repr(C, align(64))]
pub(crate) struct TaskRecord {
    pub(crate) id: AtomicU64,
    pub(crate) state: AtomicU64,
    pub(crate) polls: AtomicU64,
    pub(crate) wakes: AtomicU64,
    /// The current-frame word while the task's poll runs (see
    /// [`crate::record::current`]).
    pub(crate) current: AtomicPtr<AsyncStackFrame>,
    /// The executor's waker: its data pointer and its vtable id (`0`: no
    /// waker; see [`vtables`]).
    pub(crate) waker_data: WakerPart<*const ()>,
    pub(crate) waker_vtable: WakerPart<u32>,
    pub(crate) refs: AtomicU32,
    /// Wakes from inside the task's own polls.
    pub(crate) self_wakes: AtomicU64,
    // Second line.
    /// The task that spawned this one (`0`: unknown).
    pub(crate) parent: AtomicU64,
    /// The packed `spawn` word (see [`spawn`]).
    pub(crate) spawn: AtomicU32,
    pub(crate) seq: AtomicU32,
    pub(crate) foreign: AtomicU64,
    pub(crate) meta: AtomicU64,
    pub(crate) births: AtomicU32,
    pub(crate) chunk: AtomicU32,
    pub(crate) slots: [AtomicU64; crate::task::stack::INLINE_SLOTS],
}

const _: () = assert!(std::mem::size_of::<TaskRecord>() == 128 || cfg!(async_stack_loom));
const _: () = assert!(std::mem::align_of::<TaskRecord>() == 64);

impl std::fmt::Debug for TaskRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskRecord")
            .field("id", &self.id.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl TaskRecord {
    /// A free record, at incarnation 1.
    pub(crate) fn new() -> Self {
        TaskRecord {
            id: AtomicU64::new(0),
            state: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            wakes: AtomicU64::new(0),
            current: AtomicPtr::new(std::ptr::null_mut()),
            waker_data: WakerPart::new(std::ptr::null()),
            waker_vtable: WakerPart::new(0),
            refs: AtomicU32::new(0),
            self_wakes: AtomicU64::new(0),
            parent: AtomicU64::new(0),
            spawn: AtomicU32::new(0),
            seq: AtomicU32::new(0),
            foreign: AtomicU64::new(crate::task::stack::foreign::FIRST),
            meta: AtomicU64::new(0),
            births: AtomicU32::new(0),
            chunk: AtomicU32::new(0),
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Asks the processor to bring both lines of the record closer (a
    /// dump visits records far apart).
    #[inline]
    pub(crate) fn prefetch(&self) {
        let p = std::ptr::from_ref(self).cast::<u8>();
        crate::sync::prefetch(p);
        crate::sync::prefetch(p.wrapping_add(64));
    }

    // ---- the executor's waker (see `WakerPart` for who may call these) ----

    /// Stores the executor's waker of a new task: as its data pointer and
    /// interned vtable id, or boxed if its vtable finds no room in
    /// [`vtables`] (see the module docs).
    ///
    /// # Safety
    ///
    /// `refs` is 0 (no waker refers to the record, so nobody reads the
    /// cell), and the record holds no waker ([`take_waker`] ran since the
    /// last `put_waker`, or it never ran).
    ///
    /// [`take_waker`]: Self::take_waker
    pub(crate) unsafe fn put_waker(&self, waker: Waker) {
        match vtables::id(waker.vtable()) {
            // SAFETY: per the caller's obligations.
            Some(id) => unsafe { self.put_waker_parts(ManuallyDrop::new(waker).data(), id) },
            // SAFETY: per the caller's obligations.
            None => unsafe { self.put_boxed_waker(waker) },
        }
    }

    /// [`put_waker`](Self::put_waker) for a waker kept boxed, whatever its
    /// vtable (loom models call it directly).
    ///
    /// # Safety
    ///
    /// As for `put_waker`.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn put_boxed_waker(&self, waker: Waker) {
        let data = Box::into_raw(Box::new(waker)).cast_const().cast::<()>();
        // SAFETY: per the caller's obligations; `take_waker` frees the box.
        unsafe { self.put_waker_parts(data, vtables::BOXED) }
    }

    /// # Safety
    ///
    /// As for [`put_waker`](Self::put_waker); `(data, id)` own a waker:
    /// the parts of one with an interned vtable of id `id`, or a
    /// `Box<Waker>` with id [`vtables::BOXED`].
    unsafe fn put_waker_parts(&self, data: *const (), id: u32) {
        // SAFETY: exclusive access, per the caller's obligations.
        unsafe {
            self.waker_data.write(data);
            self.waker_vtable.write(id);
        }
    }

    /// Calls `f` with the executor's waker, borrowed; `None` if the record
    /// holds none, which only a free record does. (A closure rather than a
    /// returned borrow, so that the usual case, an interned vtable, is
    /// compiled apart from the cold boxed one, with no merge between.)
    ///
    /// # Safety
    ///
    /// The caller holds a reference counted in `refs` (the live task's, or
    /// a waker's), so the waker is neither being written nor dropped.
    #[inline(always)]
    pub(crate) unsafe fn with_executor_waker<R>(&self, f: impl FnOnce(&Waker) -> R) -> Option<R> {
        // SAFETY: per the caller's obligations.
        let (data, id) = unsafe { (self.waker_data.read(), self.waker_vtable.read()) };
        let Some(vtable) = vtables::get(id) else {
            // SAFETY: per the caller's obligations, `data` is what
            // `put_waker` stored with `id`, and stays alive.
            return unsafe { Self::with_boxed_waker(data, id, f) };
        };
        // SAFETY: `data` and `vtable` are the parts of the waker that
        // `put_waker` stored and that stays alive while the reference is
        // held; the `ManuallyDrop` never drops this copy, so it is a
        // borrow of that waker.
        let waker = ManuallyDrop::new(unsafe { Waker::new(data, vtable) });
        Some(f(&waker))
    }

    /// [`with_executor_waker`](Self::with_executor_waker) for a vtable id
    /// that is not interned: the boxed waker if `id` is
    /// [`vtables::BOXED`], else none.
    ///
    /// # Safety
    ///
    /// `(data, id)` were stored together by `put_waker`, and the waker
    /// they own stays alive during the call.
    #[cold]
    #[inline(never)]
    unsafe fn with_boxed_waker<R>(
        data: *const (),
        id: u32,
        f: impl FnOnce(&Waker) -> R,
    ) -> Option<R> {
        if id != vtables::BOXED {
            return None;
        }
        // SAFETY: with id `BOXED`, `data` is a `Box<Waker>` that the record
        // owns and keeps alive (the caller's obligation).
        Some(f(unsafe { &*data.cast::<Waker>() }))
    }

    /// Whether the executor's waker wakes the same task as `other` (as
    /// [`Waker::will_wake`] tells: the same data pointer and vtable).
    /// Called on every task poll: for an interned vtable, two compares,
    /// as `Waker::will_wake` makes them; a boxed waker is compared in a
    /// cold call, whose result does not merge into the usual path.
    ///
    /// # Safety
    ///
    /// As for [`with_executor_waker`](Self::with_executor_waker).
    #[inline(always)]
    pub(crate) unsafe fn will_wake(&self, other: &Waker) -> bool {
        // SAFETY: per the caller's obligations.
        let (data, id) = unsafe { (self.waker_data.read(), self.waker_vtable.read()) };
        match vtables::get(id) {
            Some(vtable) => data == other.data() && std::ptr::eq(vtable, other.vtable()),
            None => {
                // SAFETY: per the caller's obligations.
                let same = unsafe { Self::with_boxed_waker(data, id, |w| w.will_wake(other)) };
                same == Some(true)
            }
        }
    }

    /// Takes the executor's waker out, to drop it.
    ///
    /// # Safety
    ///
    /// `refs` just reached 0 on this thread (with acquire ordering): the
    /// record holds the waker `put_waker` stored and nobody else can read
    /// it.
    pub(crate) unsafe fn take_waker(&self) -> Option<Waker> {
        // SAFETY: exclusive access, per the caller's obligations.
        let (data, id) = unsafe { (self.waker_data.read(), self.waker_vtable.read()) };
        let waker = match vtables::get(id) {
            // SAFETY: the parts of the waker this record owns, stored by
            // `put_waker`; the cell is cleared below, so it is taken once.
            Some(vtable) => Some(unsafe { Waker::new(data, vtable) }),
            None if id == vtables::BOXED => {
                // SAFETY: with id `BOXED`, `data` is a `Box<Waker>` this
                // record owns, from `put_boxed_waker`; taken once, as
                // above.
                let boxed = unsafe { Box::from_raw(data.cast_mut().cast::<Waker>()) };
                Some(*boxed)
            }
            None => None,
        };
        // SAFETY: exclusive access, per the caller's obligations.
        unsafe {
            self.waker_vtable.write(0);
            self.waker_data.write(std::ptr::null());
        }
        waker
    }

    // ---- references (see `refs`) ----

    /// One more reference: a new waker of the task. A count that passes
    /// [`refs::MAX`] sticks.
    #[inline(always)]
    pub(crate) fn add_ref(&self) {
        if self.refs.fetch_add(1, Ordering::Relaxed) >= refs::MAX {
            self.stick_refs();
        }
    }

    /// One reference less. Returns the count before: `1` means that was
    /// the last one, and the caller recycles the record (after an acquire
    /// fence). A stuck count stays stuck, so it never returns `1`.
    #[inline(always)]
    pub(crate) fn drop_ref(&self) -> u32 {
        let before = self.refs.fetch_sub(1, Ordering::Release);
        if before > refs::MAX {
            self.stick_refs();
        }
        before
    }

    #[cold]
    #[inline(never)]
    fn stick_refs(&self) {
        self.refs.store(refs::STUCK, Ordering::Relaxed);
    }

    /// Where the task was spawned, if a spawn helper said so: a call site
    /// with the spawn call's file, line and column.
    pub(crate) fn location(&self) -> Option<&'static crate::record::site::CallSite> {
        let site = spawn::site(self.spawn.load(Ordering::Relaxed));
        crate::record::site::call_site_by_id(site)
    }

    /// The name of the task in this record (index `index`), if it has one.
    /// Not validated: the caller checks the id afterwards.
    pub(crate) fn name(&self, index: u32) -> Option<Arc<TaskName>> {
        if !spawn::named(self.spawn.load(Ordering::Acquire)) {
            return None;
        }
        crate::task::registry::ext(index)?.name.load()
    }

    // ---- the polling thread ----

    /// A poll starts: the task runs from `now_ms` on thread `thread`.
    /// Wakes counted so far are consumed by this poll.
    ///
    /// The poll count is the version of a copy (see [`read`](Self::read)):
    /// `state` is written first, then a release fence, then `polls`, then
    /// another release fence before the caller stores the running frame in
    /// `current`. So a reader that sees the new count also sees the running
    /// state, and a reader that sees the frame also sees the new count.
    /// (Both fences cost nothing on x86-64.) Returns the wake count the poll
    /// starts from, for [`end_poll`].
    ///
    /// [`end_poll`]: Self::end_poll
    #[inline(always)]
    pub(crate) fn start_poll(&self, now_ms: u64) -> u64 {
        let seen = wakes::count(self.wakes.load(Ordering::Acquire));
        self.state
            .store(state::pack(state::RUNNING, seen, now_ms), Ordering::Relaxed);
        fence(Ordering::Release);
        let polls = self.polls.load(Ordering::Relaxed);
        self.polls.store(polls.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        seen
    }

    /// The poll that started from wake count `seen` returned `Pending` (or
    /// unwound) after waking the task from inside `self_wakes` times: idle,
    /// or scheduled if it woke itself. The caller has cleared `current`
    /// already; the release store of `state` orders that before it.
    #[inline(always)]
    pub(crate) fn end_poll(&self, now_ms: u64, self_wakes: u32, seen: u64) {
        let next = if self_wakes == 0 {
            state::IDLE
        } else {
            let n = self.self_wakes.load(Ordering::Relaxed);
            self.self_wakes
                .store(n.wrapping_add(u64::from(self_wakes)), Ordering::Relaxed);
            state::SCHEDULED
        };
        self.state
            .store(state::pack(next, seen, now_ms), Ordering::Release);
    }

    /// The count of wakes from outside the task's polls so far.
    #[inline]
    pub(crate) fn woken_count(&self) -> u64 {
        wakes::count(self.wakes.load(Ordering::Acquire))
    }

    // ---- wakers ----

    /// A wake from outside the task's poll. The first one after a poll
    /// started stamps the time (reading the clock only then).
    pub(crate) fn count_wake(&self, now_ms: impl Fn() -> u64) {
        let (_, seen, _) = state::unpack(self.state.load(Ordering::Acquire));
        let mut cur = self.wakes.load(Ordering::Relaxed);
        let mut now = None;
        loop {
            let first = wakes::count(cur) & state::SEEN_MASK == seen;
            let stamp = if first {
                *now.get_or_insert_with(&now_ms)
            } else {
                0
            };
            match self.wakes.compare_exchange_weak(
                cur,
                wakes::add(cur, first, stamp),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }
}

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
    /// Whether the published stack was copied (into the caller's buffer);
    /// `false` if every copy attempt was torn.
    pub(crate) stack_copied: bool,
    /// Copies of the stack that were torn and retried.
    pub(crate) torn: u32,
}

/// How long (spin-loop hints) a reader waits for a section in progress
/// to end before an attempt at copying a record.
const SECTION_SPINS: u32 = if cfg!(async_stack_loom) { 0 } else { 512 };

/// How many times a reader retries a torn copy of a record before giving
/// up on its stack (the task is still reported, without frames).
pub(crate) const COPY_TRIES: u32 = if cfg!(async_stack_loom) { 2 } else { 16 };

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

    /// Copies this record, if it holds a live task, as one instant (see
    /// the module docs); its stack goes into `copy`. Never blocks: no lock,
    /// no waiting for a running poll. `None` for a free record or a task
    /// that ended while being read.
    pub(crate) fn read(&self, index: u32, copy: &mut StackCopy, now_ms: u64) -> Option<RawTask> {
        self.read_tries(index, copy, now_ms, COPY_TRIES)
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
    /// with (parent, spawn location, name) only if `want_ext(id,
    /// root_site)` says so; otherwise they are `0` and `None`. These do
    /// not change while a task lives (they are written before its id is
    /// published and cleared after the id is), so a reader that already
    /// knows them for this id and root can skip them: the sampler's steady
    /// path, which thereby takes no reference to the name. Inlined, so
    /// that the copy is not returned through memory (a sampler reads
    /// thousands of records per tick). `index` is the record's index,
    /// which finds the task's name (see [`TaskExt`]).
    #[inline]
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
        let (parent, location, name) = if want_ext(id, h.root_site) {
            (
                self.parent.load(Ordering::Relaxed),
                self.location(),
                self.name(index),
            )
        } else {
            (0, None, None)
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
        copy.build(current::running_slot(running), f1);
        Ok(Header {
            state: st1,
            polls: p1,
            wakes,
            self_wakes,
            root_site: copy.raw.first().map_or(0, |&w| stack::word::site(w)),
        })
    }

    /// The header alone, from one instant of the poll counters.
    fn header_once(&self) -> Option<Header> {
        for _ in 0..COPY_TRIES {
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
                    root_site: stack::word::site(root),
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

/// What few tasks have beyond their record: a name given through a spawn
/// helper, and a second waker for a root whose executor changed its
/// waker. Extension `i` belongs to record `i`; extensions live in pages
/// beside the records' (see [`crate::task::registry`]), allocated the first
/// time a task of that page needs one and never freed. Readers validate
/// what they read against the record's `id`. `#[repr(C)]` for debugger
/// scripts.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct TaskExt {
    /// The task's name, while the record's `spawn` word says `named`.
    pub(crate) name: NameCell,
    /// The waker of a root whose executor's waker changed (see
    /// [`crate::task::waker`]); owned, released when the task ends.
    pub(crate) fallback: AtomicPtr<()>,
}

/// A task's name, laid out for debugger scripts: the text's address and
/// length first (`#[repr(C)]`), then the string that owns the text.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct TaskName {
    ptr: *const u8,
    len: usize,
    text: Box<str>,
}

// SAFETY: `ptr` and `len` describe `text`, which the name owns and never
// changes; they are only read.
unsafe impl Send for TaskName {}
// SAFETY: as above.
unsafe impl Sync for TaskName {}

impl TaskName {
    /// Where a debugger finds the text's address and length.
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const PTR_OFFSET: usize = std::mem::offset_of!(TaskName, ptr);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const LEN_OFFSET: usize = std::mem::offset_of!(TaskName, len);

    pub(crate) fn new(text: String) -> Self {
        let text = text.into_boxed_str();
        TaskName {
            ptr: text.as_ptr(),
            len: text.len(),
            text,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }
}

/// A task name that readers load without taking a lock.
#[cfg(not(async_stack_loom))]
#[derive(Debug, Default)]
pub(crate) struct NameCell(arc_swap::ArcSwapOption<TaskName>);

#[cfg(not(async_stack_loom))]
impl NameCell {
    pub(crate) fn store(&self, name: Option<Arc<TaskName>>) {
        self.0.store(name);
    }
    pub(crate) fn load(&self) -> Option<Arc<TaskName>> {
        self.0.load_full()
    }
}

/// Under loom, a mutex stands in for `arc-swap` (which loom cannot model).
#[cfg(async_stack_loom)]
#[derive(Debug, Default)]
pub(crate) struct NameCell(crate::sync::Mutex<Option<Arc<TaskName>>>);

#[cfg(async_stack_loom)]
impl NameCell {
    pub(crate) fn store(&self, name: Option<Arc<TaskName>>) {
        *crate::sync::lock(&self.0) = name;
    }
    pub(crate) fn load(&self) -> Option<Arc<TaskName>> {
        crate::sync::lock(&self.0).clone()
    }
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_two_cache_lines_laid_out_as_documented() {
        let r = TaskRecord::new();
        let base = std::ptr::from_ref(&r) as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(std::mem::size_of::<TaskRecord>(), 128);
        assert_eq!(at(std::ptr::from_ref(&r.state).cast()), 8);
        assert_eq!(at(std::ptr::from_ref(&r.current).cast()), 32);
        assert_eq!(at(std::ptr::from_ref(&r.waker_data).cast()), 40);
        assert_eq!(at(std::ptr::from_ref(&r.waker_vtable).cast()), 48);
        assert_eq!(at(std::ptr::from_ref(&r.refs).cast()), 52);
        assert_eq!(at(std::ptr::from_ref(&r.self_wakes).cast()), 56);
        assert_eq!(at(std::ptr::from_ref(&r.parent).cast()), 64);
        assert_eq!(at(std::ptr::from_ref(&r.spawn).cast()), 72);
        assert_eq!(at(std::ptr::from_ref(&r.seq).cast()), 76);
        assert_eq!(at(std::ptr::from_ref(&r.slots).cast()), 104);
    }

    #[test]
    fn state_and_wake_words_round_trip() {
        let w = state::pack(state::RUNNING, 0x3f_ffff + 5, 123_456_789);
        assert_eq!(state::unpack(w), (state::RUNNING, 4, 123_456_789));
        let w = wakes::add(wakes::add(0, true, 0x0123_4567), false, 99);
        assert_eq!(wakes::count(w), 2);
        assert_eq!(wakes::woken_low(w), 0x23_4567);
        // The full time is the latest one with those low bits.
        assert_eq!(wakes::woken_ms(0x23_4567, 0x0123_4570), 0x0123_4567);
        assert_eq!(wakes::woken_ms(0x23_4567, 0x0223_4566), 0x0123_4567);
        assert_eq!(wakes::woken_ms(5, 3), 0, "never before the origin");
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use crate::record::current::Active;
    use crate::task::TaskState;
    use crate::task::loom_support::{ROOT, end_poll, start_poll, task, view};

    /// A wake from another thread during a poll is not lost: the task ends
    /// the poll scheduled, and the wake is counted.
    #[test]
    fn a_wake_during_a_poll_leaves_the_task_scheduled() {
        loom::model(|| {
            let t = task(&ROOT, 1);
            let a = Active::new();
            let seen = start_poll(t, &a);
            let waker = loom::thread::spawn(move || t.record.count_wake(|| 5));
            end_poll(t, &a, seen);
            waker.join().unwrap();
            assert_eq!(view(t).unwrap().1, TaskState::Scheduled);
        });
    }

    /// A copy taken while the task is polled twice in a row, both polls
    /// ending in the very same idle word (same time, no wake), pairs an
    /// idle task with no running frame and a running task with a path of
    /// running frames: never an idle state read before a poll with the
    /// running root of that poll.
    #[test]
    fn a_copy_never_pairs_an_idle_state_with_a_running_frame() {
        loom::model(|| {
            let t = task(&ROOT, 1);
            let poller = loom::thread::spawn(move || {
                let a = Active::new();
                for _ in 0..2 {
                    let seen = start_poll(t, &a);
                    end_poll(t, &a, seen);
                }
            });
            if let Some((_, state, frames)) = view(t) {
                let running = frames.iter().any(|f| f.2);
                assert!(
                    state == TaskState::Running || !running,
                    "{state:?} with a running frame: {frames:?}"
                );
            }
            poller.join().unwrap();
        });
    }
}
