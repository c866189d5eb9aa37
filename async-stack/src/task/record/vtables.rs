//! The interned vtables of executors' wakers. A record keeps its task's
//! executor waker as the waker's data pointer and the index + 1 of its
//! vtable here, in 12 bytes instead of 16; a process sees one vtable or
//! two (tokio has one). Entries are appended, never changed or removed.
//! A waker whose vtable finds the table full is kept boxed instead (id
//! [`BOXED`]).
//!
//! The methods of [`TaskRecord`] that store, lend, compare and take the
//! executor's waker are here too: they are the only code that reads
//! `waker_data` and `waker_vtable` (see
//! [`WakerPart`](crate::task::record::layout::WakerPart) for who may call
//! them).

use std::mem::ManuallyDrop;
use std::task::Waker;

use crate::task::record::layout::TaskRecord;
// std's, not `crate::shim`'s: the table is a `static` built by a `const fn`
// (loom's atomics and mutexes have no `const` constructor). Entries are
// appended under the mutex, each published once with release ordering and
// never changed; the unit test below checks the table itself.
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::task::RawWakerVTable;

/// The most vtables interned.
pub(crate) const MAX: usize = 64;

/// The vtable id of a record whose executor waker is boxed: its data
/// pointer is then a `Box<Waker>`'s. No interned vtable has this id
/// ([`get`] gives `None` for it).
pub(crate) const BOXED: u32 = u32::MAX;

/// An append-only table of up to `N` vtables, in `SLOTS` entries: the
/// vtable of id `i` (`1..=N`) is entry `i`; entry 0 and those past `N`
/// stay null. `SLOTS` is a power of two above `N`, so that the poll's
/// check ([`Table::is`]) indexes with a mask and no bounds check: every id
/// a record holds (0, `1..=N` or [`BOXED`]) masks to its own entry or to a
/// null one.
pub(crate) struct Table<const N: usize, const SLOTS: usize> {
    entries: [AtomicPtr<RawWakerVTable>; SLOTS],
    append: Mutex<()>,
}

impl<const N: usize, const SLOTS: usize> Table<N, SLOTS> {
    pub(crate) const fn new() -> Self {
        assert!(SLOTS.is_power_of_two() && N < SLOTS && (BOXED as usize) & (SLOTS - 1) > N);
        Table {
            entries: [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS],
            append: Mutex::new(()),
        }
    }

    /// The id (index + 1) of `vtable`, interning it if it is new;
    /// `None` when the table is full.
    ///
    /// Every task's first poll asks, and nearly always finds its
    /// executor's vtable in the first entry or two: the lookup is inlined
    /// and the append is out of line.
    #[inline]
    pub(crate) fn id(&self, vtable: &'static RawWakerVTable) -> Option<u32> {
        let wanted = std::ptr::from_ref(vtable).cast_mut();
        if let Some((id, p)) = self.find(wanted)
            && p == wanted
        {
            return Some(id);
        }
        self.append(wanted)
    }

    /// The entry holding `wanted`, or else the first free one: its id and
    /// what it holds.
    #[inline(always)]
    fn find(&self, wanted: *mut RawWakerVTable) -> Option<(u32, *mut RawWakerVTable)> {
        for (id, e) in (1..).zip(&self.entries[1..=N]) {
            let p = e.load(Ordering::Acquire);
            if p == wanted || p.is_null() {
                return Some((id, p));
            }
        }
        None
    }

    /// [`id`](Self::id) for a vtable that was not in the table a moment
    /// ago: under the mutex, the entry another thread appended it to since,
    /// or else the first free one, which it takes.
    #[cold]
    #[inline(never)]
    fn append(&self, wanted: *mut RawWakerVTable) -> Option<u32> {
        let _append = crate::shim::lock_std(&self.append);
        let (id, p) = self.find(wanted)?;
        if p.is_null() {
            self.entries[id as usize].store(wanted, Ordering::Release);
        }
        Some(id)
    }

    /// The vtable of id `id`, if it was interned.
    #[inline(always)]
    pub(crate) fn get(&self, id: u32) -> Option<&'static RawWakerVTable> {
        // Entry 0 and those past `N` are null.
        let p = self.entries.get(id as usize)?.load(Ordering::Acquire);
        // SAFETY: a non-null entry was stored from a `&'static
        // RawWakerVTable` and never changes.
        unsafe { p.as_ref() }
    }

    /// Whether `id`, an id a record holds (0, an interned id or
    /// [`BOXED`]), is that of the interned `vtable`: one masked load and a
    /// compare. (A pointer compare only: the entry is not read through.)
    #[inline(always)]
    pub(crate) fn is(&self, id: u32, vtable: &'static RawWakerVTable) -> bool {
        let entry = &self.entries[id as usize & (SLOTS - 1)];
        std::ptr::eq(entry.load(Ordering::Relaxed), vtable)
    }
}

/// Entries of the process's table: the next power of two above [`MAX`].
const SLOTS: usize = (MAX + 1).next_power_of_two();

static TABLE: Table<MAX, SLOTS> = Table::new();

/// The process's id of `vtable` (see [`Table::id`]).
#[inline]
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
        let t: Table<2, 4> = Table::new();
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
        // The poll's check, over every id a record can hold.
        assert!(t.is(1, &A) && t.is(2, &B));
        assert!(!t.is(1, &B) && !t.is(2, &A) && !t.is(1, &C));
        for id in [0, super::BOXED] {
            assert!(!t.is(id, &A) && !t.is(id, &B) && !t.is(id, &C));
        }
    }
}

impl TaskRecord {
    // ---- the executor's waker (see `WakerPart` for who may call these) ----

    /// Stores the executor's waker of a new task: as its data pointer and
    /// interned vtable id, or boxed if its vtable finds no room in the
    /// process's table ([`TABLE`], see the module docs).
    ///
    /// # Safety
    ///
    /// Nobody reads the cell: no waker refers to the record (`refs` counts
    /// at most the task itself, which no poll has lent a waker of yet),
    /// and the record holds no waker ([`take_waker`] ran since the last
    /// `put_waker`, or it never ran).
    ///
    /// [`take_waker`]: Self::take_waker
    #[inline]
    pub(crate) unsafe fn put_waker(&self, waker: Waker) {
        match id(waker.vtable()) {
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
        unsafe { self.put_waker_parts(data, BOXED) }
    }

    /// # Safety
    ///
    /// As for [`put_waker`](Self::put_waker); `(data, id)` own a waker:
    /// the parts of one with an interned vtable of id `id`, or a
    /// `Box<Waker>` with id [`BOXED`].
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
        let Some(vtable) = get(id) else {
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
    /// [`BOXED`], else none.
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
        if id != BOXED {
            return None;
        }
        // SAFETY: with id `BOXED`, `data` is a `Box<Waker>` that the record
        // owns and keeps alive (the caller's obligation).
        Some(f(unsafe { &*data.cast::<Waker>() }))
    }

    /// Whether the executor's waker wakes the same task as `other` (as
    /// [`Waker::will_wake`] tells: the same data pointer and vtable).
    /// Called on every task poll: for the same waker with an interned
    /// vtable, two compares (as `Waker::will_wake` makes them) and one
    /// load from the table with no bounds check; any other answer, and a
    /// boxed waker, is worked out in a cold call.
    ///
    /// # Safety
    ///
    /// As for [`with_executor_waker`](Self::with_executor_waker).
    #[inline(always)]
    pub(crate) unsafe fn will_wake(&self, other: &Waker) -> bool {
        // SAFETY: per the caller's obligations.
        let (data, id) = unsafe { (self.waker_data.read(), self.waker_vtable.read()) };
        // An interned vtable that matches: the usual case, and the whole
        // answer (a null entry matches no waker's vtable).
        if data == other.data() && TABLE.is(id, other.vtable()) {
            return true;
        }
        // SAFETY: per the caller's obligations.
        unsafe { Self::will_wake_boxed(data, id, other) }
    }

    /// [`will_wake`](Self::will_wake) when the executor's waker is not
    /// the interned `other`: a boxed waker is compared through its box.
    ///
    /// # Safety
    ///
    /// As for [`with_boxed_waker`](Self::with_boxed_waker).
    #[cold]
    #[inline(never)]
    unsafe fn will_wake_boxed(data: *const (), id: u32, other: &Waker) -> bool {
        // SAFETY: per the caller's obligations.
        let same = unsafe { Self::with_boxed_waker(data, id, |w| w.will_wake(other)) };
        same == Some(true)
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
        let waker = match get(id) {
            // SAFETY: the parts of the waker this record owns, stored by
            // `put_waker`; the cell is cleared below, so it is taken once.
            Some(vtable) => Some(unsafe { Waker::new(data, vtable) }),
            None if id == BOXED => {
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
}
