//! The record's **layout**: the struct, its packed words (`state`,
//! `wakes`, `spawn`, `refs`), and what the polling thread and wakers write
//! (see [`crate::task::record`] for who writes which field).

use std::cell::UnsafeCell;

use crate::record::current::{self, Active, OpaqueRecord};
use crate::record::frame::AsyncStackFrame;
use crate::shim::{AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};
use crate::task::place;
use crate::task::stack::words::{INLINE_SLOTS, foreign};

/// The packed `state` word.
///
/// | bits | field |
/// |---|---|
/// | 0..2 | state: [`IDLE`](state::IDLE), [`SCHEDULED`](state::SCHEDULED) or [`RUNNING`](state::RUNNING) |
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

/// The packed `spawn` word: `[named: 1][fallback: 1][tokio: 1][unused: 5][site: 24]`.
/// `site` is the interned call-site id (see [`crate::record::site`]) of
/// the spawn call that started the task, `0` if it was not started
/// through a spawn helper; `named` is set while the task's [`TaskExt`]
/// holds a name, `fallback` once it may hold a fallback waker (so that
/// the end of a task without either skips its extension); `tokio` when
/// the root's first poll ran inside a tokio task, whose id (and the
/// root's place among that task's roots) the extension then holds (see
/// [`crate::task::tokio_task`]).
///
/// [`TaskExt`]: crate::task::record::TaskExt
pub(crate) mod spawn {
    use crate::record::site::SITE_ID_BITS;

    pub(crate) const SITE_MASK: u32 = (1 << SITE_ID_BITS) - 1;
    pub(crate) const NAMED: u32 = 1 << 31;
    pub(crate) const FALLBACK: u32 = 1 << 30;
    pub(crate) const TOKIO: u32 = 1 << 29;

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

    /// Whether the root was first polled inside a tokio task.
    #[inline]
    pub(crate) fn in_tokio(word: u32) -> bool {
        word & TOKIO != 0
    }

    /// Whether the task's extension may hold something that the end of
    /// the task releases: a name or a fallback waker.
    #[inline]
    pub(crate) fn has_ext(word: u32) -> bool {
        word & (NAMED | FALLBACK) != 0
    }
}

/// The `refs` count of a record: one for the live task, one per waker of
/// it (and one per fallback waker, see [`crate::task::waker`]).
///
/// Exact up to [`MAX`](refs::MAX), which no program reaches except by
/// forgetting wakers (`mem::forget`: 2^31 of them, some 15 s of safe
/// code). A count that would pass `MAX` *sticks*: it is set to
/// [`STUCK`](refs::STUCK), halfway between `MAX` and the wrap, and every
/// later increment or decrement that sees it above `MAX` sets it back
/// there. So it never wraps to a small count, the record is never
/// recycled, and each waker of it keeps waking the executor of the task it
/// was made for. The record (128 bytes) and the executor's waker are kept
/// for the rest of the process: where `Arc` aborts the process, a library
/// inside a production process leaks one record.
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

/// A part of the executor's waker of a task, kept in its record: its data
/// pointer, or its vtable id (see [`crate::task::record::vtables`]).
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
    pub(crate) unsafe fn read(&self) -> T
    where
        T: Copy,
    {
        // SAFETY: not written while a reference is held.
        unsafe { *self.0.get() }
    }

    /// # Safety
    ///
    /// Per the type's docs: `refs` is 0 and this thread owns the record.
    pub(crate) unsafe fn write(&self, value: T) {
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
    /// waker; see [`crate::task::record::vtables`]).
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
    pub(crate) slots: [AtomicU64; INLINE_SLOTS],
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
            foreign: AtomicU64::new(foreign::FIRST),
            meta: AtomicU64::new(0),
            births: AtomicU32::new(0),
            chunk: AtomicU32::new(0),
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The record of the task whose poll runs on the thread of `a`; `None`
    /// outside task polls and for an untracked root.
    #[inline(always)]
    pub(crate) fn running(a: &Active) -> Option<&'static TaskRecord> {
        // SAFETY: a thread's running record is null or was stored by
        // `root::begin` from `TaskRecord::opaque` of a registry record,
        // which is never freed.
        unsafe { a.record().cast::<TaskRecord>().as_ref() }
    }

    /// This record as the thread state holds it while its task is polled
    /// ([`Active::enter_task`]); [`TaskRecord::running`] reads it back.
    #[inline(always)]
    pub(crate) fn opaque(&'static self) -> *const OpaqueRecord {
        std::ptr::from_ref(self).cast()
    }

    /// Asks the processor to bring both lines of the record closer (a
    /// dump visits records far apart).
    #[inline]
    pub(crate) fn prefetch(&self) {
        let p = std::ptr::from_ref(self).cast::<u8>();
        crate::shim::prefetch(p);
        crate::shim::prefetch(p.wrapping_add(64));
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
    #[cfg_attr(async_stack_loom, allow(dead_code))]
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

/// The id of the task whose poll is running on this thread, if any.
///
/// Inlined: a few loads, which every spawn through the helpers and every
/// recorded wait asks for.
#[inline]
pub fn current_task_id() -> Option<u64> {
    current::with(|a| TaskRecord::running(a).map(|r| r.id.load(Ordering::Relaxed)))
        .flatten()
        .filter(|&id| id != 0)
}

/// Where a future is awaited, packed in one word (see
/// [`current_task_and_await`]): the await site's id in the low 32 bits,
/// and the birth of the frame suspended there (its slot's, see
/// [`crate::task::stack`]) in the high 32, so that another frame at the
/// same `.await` (a generic helper called again, a recursion) is not taken
/// for it. `0`: not known.
pub(crate) fn awaited(site: u32, birth: u32) -> u64 {
    u64::from(site) | u64::from(birth) << 32
}

/// The await site id of an [`awaited`] word.
pub(crate) fn awaited_site(awaiting: u64) -> u32 {
    awaiting as u32
}

/// The frame birth of an [`awaited`] word.
pub(crate) fn awaited_birth(awaiting: u64) -> u32 {
    (awaiting >> 32) as u32
}

/// The [`awaited`] word of a wait polled between two `.await`s of its
/// frame: no site has its id, so readers find its task never suspended
/// there.
pub(crate) const NOT_AT_AWAIT: u64 = u32::MAX as u64;

/// The id of the task whose poll is running on this thread (`0`: none),
/// and where its current frame is: the [`awaited`] word of the `.await`
/// it is at and of the frame itself, where a future polled now is
/// awaited, for a wait that lasts only while that frame stays there. `0`
/// when that is not known (no task, or a frame without a slot in the
/// task's published stack, which readers could not see there, or a
/// `.traced()` future, which records no `.await`s); [`NOT_AT_AWAIT`] when
/// a `#[traced_async]` body runs between two `.await`s (a future polled
/// once there, by `futures::poll!` or `now_or_never()`, is awaited
/// nowhere). Third, with a known `.await` in a frame below the root, the
/// frame's ancestry (see [`crate::task::stack::ancestry`]; `0` otherwise),
/// for a wait that lasts only while the frames above it stay where they
/// were too.
// Its callers are the waits of feature `tokio`.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub(crate) fn current_task_and_await() -> (u64, u64, u64) {
    current::with(|a| {
        let Some(r) = TaskRecord::running(a) else {
            return (0, 0, 0);
        };
        let task = r.id.load(Ordering::Relaxed);
        // SAFETY: per the invariant of `current`, a non-null frame is one
        // whose poll is on this thread's stack, hence alive.
        let Some(frame) = (unsafe { a.frame().as_ref() }) else {
            return (task, 0, 0);
        };
        let p = frame.place.load(Ordering::Relaxed);
        let own = place::own(p);
        if own == current::NO_SLOT {
            return (task, 0, 0);
        }
        match frame.await_site() {
            // The frame was placed in this task on entry to its poll, in
            // slot `own`.
            // The root (slot 0) has no ancestors to move: no ancestry. A
            // child's place names its parent's slot, as its word does.
            Some(s) => {
                let path = if own == 0 {
                    0
                } else {
                    r.ancestry_from(place::parent(p))
                };
                (task, awaited(s.id(), r.birth_of(own)), path)
            }
            // Between two `.await`s of a body that records them.
            None if frame.call_site().records_awaits() => (task, NOT_AT_AWAIT, 0),
            // A `.traced()` future: where it awaits is not known.
            None => (task, 0, 0),
        }
    })
    .unwrap_or((0, 0, 0))
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
