//! The thread's **current frame**: which frame is being polled right now,
//! and in which task. This is the only thread-local state of the crate.
//!
//! # The current-frame word
//!
//! While a task root's poll runs on this thread, [`Active::current`] points to
//! the word that holds the thread's current frame: the `current` word of
//! the task's record (see [`crate::task::record`]), so that readers of the
//! task see which frame runs without any store of its own, or
//! [`Active::untracked`] for a root the registry could not take. A frame
//! stores itself there on entry to its poll and restores its parent on
//! every exit path, unwinding included.
//!
//! On x86-64 the word also carries the frame's slot in its task's
//! published stack, in bits 58 to 63 (user-space addresses have those bits
//! clear, with 4- and 5-level paging alike): readers learn which slot runs
//! from one load, and a child learns its parent's slot without reading the
//! parent. Elsewhere the word is a plain pointer, and readers do not mark
//! the running frame (see the crate's "Stack accuracy").
//!
//! # Invariants
//!
//! - `current` is non-null exactly while a task root's `poll` is on this
//!   thread's native stack.
//! - While `current` is non-null, the frame it holds (untagged) is non-null,
//!   and its `poll` is on this thread's native stack. So every frame
//!   reachable from it through `parent` links is alive: each one is an
//!   ancestor whose `poll` has not returned.
//! - `record` is non-null while a tracked task root's poll is on the
//!   stack, and is then that task's record (records are never freed), and
//!   `key` is that task's place key (see [`crate::task::place`]); for an
//!   untracked root they are null and the untracked key. Outside a poll
//!   `key` keeps a stale value, which nothing reads (a place is compared
//!   with it only while `current` or `record` is set).
//! - A signal handler on this thread (the sampler's on-CPU handler) reads
//!   `current`, `record`, the current-frame word and the frames' `parent`
//!   links. So these are atomic words (relaxed: plain moves), and a
//!   compiler fence orders each store that makes a frame reachable after
//!   the stores that make it whole: the handler, interrupting the thread
//!   between any two instructions, sees `record` set whenever `current` is,
//!   and a frame's `parent` set whenever the frame is current. `key`,
//!   `self_wakes` and `thread` are plain `Cell`s that only this thread's
//!   own code reads.

use std::cell::Cell;
// std's: these words are read only by this thread and its signal
// handlers (compiler fences order them; loom models no signals), and the
// loom models give each model thread its own `Active`.
use std::sync::atomic::{AtomicPtr as LocalPtr, compiler_fence};

use crate::record::frame::AsyncStackFrame;
use crate::shim::{AtomicPtr, Ordering};

/// The record of the task being polled, as this layer sees it: an opaque
/// address that only the task layer stores and reads back (as a
/// `crate::task::record::TaskRecord`, never freed), and that readers
/// compare and hand to it.
#[repr(C)]
pub(crate) struct OpaqueRecord {
    _opaque: [u8; 0],
}

/// Per-thread state. `#[repr(C)]` for debugger scripts.
#[repr(C)]
pub(crate) struct Active {
    /// The current-frame word (see the module docs); null outside task
    /// roots' polls.
    pub(crate) current: LocalPtr<AtomicPtr<AsyncStackFrame>>,
    /// The place key of the task being polled (`0`: none).
    key: Cell<u64>,
    /// The record of the task being polled (null: none, or untracked).
    pub(crate) record: LocalPtr<OpaqueRecord>,
    /// The current-frame word of an untracked root.
    untracked: AtomicPtr<AsyncStackFrame>,
    /// How many times the task being polled woke itself during this poll.
    pub(crate) self_wakes: Cell<u32>,
    /// This thread's id (its OS id on Linux), once read (`0`: not yet); see
    /// [`crate::record::threads::thread_id`].
    pub(crate) thread: Cell<u32>,
}

macro_rules! new_active {
    () => {
        Active {
            current: LocalPtr::new(std::ptr::null_mut()),
            key: Cell::new(0),
            record: LocalPtr::new(std::ptr::null_mut()),
            untracked: AtomicPtr::new(std::ptr::null_mut()),
            self_wakes: Cell::new(0),
            thread: Cell::new(0),
        }
    };
}

#[cfg(not(async_stack_loom))]
thread_local! {
    static ACTIVE: Active = const { new_active!() };
}

// loom's atomics have no `const` constructor.
#[cfg(async_stack_loom)]
loom::thread_local! {
    static ACTIVE: Active = new_active!();
}

impl Active {
    /// A thread state for the loom models, which drive the poll protocol
    /// with one per model thread.
    #[cfg(all(test, async_stack_loom))]
    pub(crate) fn new() -> Self {
        new_active!()
    }

    /// The current-frame word, while a task root's poll runs.
    #[inline(always)]
    pub(crate) fn current(&self) -> Option<&AtomicPtr<AsyncStackFrame>> {
        // SAFETY: `current` is null, or points to `untracked` (which lives as
        // long as `self`) or to the `current` word of a record, which is
        // never freed (module invariant).
        unsafe { self.current.load(Ordering::Relaxed).as_ref() }
    }

    /// The place key of the task being polled (`0`: none).
    #[inline(always)]
    pub(crate) fn key(&self) -> u64 {
        self.key.get()
    }

    /// The record of the task being polled (null: none, or untracked).
    #[inline(always)]
    pub(crate) fn record(&self) -> *const OpaqueRecord {
        self.record.load(Ordering::Relaxed)
    }

    /// The frame being polled on this thread; null if none.
    #[inline(always)]
    pub(crate) fn frame(&self) -> *mut AsyncStackFrame {
        match self.current() {
            Some(word) => untag(word.load(Ordering::Relaxed)),
            None => std::ptr::null_mut(),
        }
    }

    /// A tracked task's poll starts on this thread: `current`, the
    /// current-frame word of the task's `record`, becomes the thread's,
    /// `root` its current frame (in slot 0).
    #[inline(always)]
    pub(crate) fn enter_task(
        &self,
        record: *const OpaqueRecord,
        current: &'static AtomicPtr<AsyncStackFrame>,
        key: u64,
        root: &AsyncStackFrame,
    ) {
        self.record.store(record.cast_mut(), Ordering::Relaxed);
        self.key.set(key);
        current.store(tag(root, 0), Ordering::Relaxed);
        // Last: the guard that clears the state exists only once the root
        // entry returns, so nothing above may leave `current` set. A signal
        // handler that sees `current` sees the stores above (module docs).
        compiler_fence(Ordering::Release);
        self.current
            .store(std::ptr::from_ref(current).cast_mut(), Ordering::Relaxed);
    }

    /// An untracked root's poll starts on this thread.
    pub(crate) fn enter_untracked(&self, root: &AsyncStackFrame, key: u64) {
        self.record.store(std::ptr::null_mut(), Ordering::Relaxed);
        self.key.set(key);
        self.untracked.store(tag(root, NO_SLOT), Ordering::Relaxed);
        compiler_fence(Ordering::Release);
        self.current.store(
            std::ptr::from_ref(&self.untracked).cast_mut(),
            Ordering::Relaxed,
        );
    }

    /// A task root's poll ends on this thread, by return or unwinding: no
    /// frame runs any more. `current` is the current-frame word of the
    /// task's record (`None`: an untracked root), the thread's. Returns the
    /// self-wakes of the poll. `key` keeps its value: it is read only
    /// while `current` or `record` is set.
    #[inline(always)]
    pub(crate) fn leave_task(&self, current: Option<&AtomicPtr<AsyncStackFrame>>) -> u32 {
        match current {
            Some(c) => c.store(std::ptr::null_mut(), Ordering::Relaxed),
            None => self
                .untracked
                .store(std::ptr::null_mut(), Ordering::Relaxed),
        }
        self.current.store(std::ptr::null_mut(), Ordering::Relaxed);
        compiler_fence(Ordering::Release);
        self.record.store(std::ptr::null_mut(), Ordering::Relaxed);
        self.self_wakes.replace(0)
    }

    /// Whether a task root was ever polled on this thread (it is an
    /// executor's thread).
    #[inline]
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) fn polled_tasks(&self) -> bool {
        self.thread.get() != 0
    }
}

/// Runs `f` with this thread's state; `None` during thread teardown, when
/// thread-locals are gone.
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&Active) -> R) -> Option<R> {
    ACTIVE.try_with(f).ok()
}

/// This thread's state, during thread teardown too.
///
/// `Active` has no destructor and a `const` initialiser, so on every target
/// with native thread-locals (`#[thread_local]`: Linux, macOS, Windows, the
/// BSDs, Android, ...) std stores it in a plain thread-local static that is
/// never in a destroyed state: this cannot fail and compiles to an address
/// computation. (On a target without native thread-locals, a traced future
/// polled from another thread-local's destructor would panic here; [`with`]
/// is the fallible form for paths off the poll.)
///
/// Returned as a reference rather than through a closure so that the poll
/// path stays one straight-line function that the compiler inlines into the
/// parent's poll.
#[cfg(not(async_stack_loom))]
#[inline(always)]
pub(crate) fn current() -> &'static Active {
    const _: () = assert!(!std::mem::needs_drop::<Active>());
    // SAFETY: the storage of a thread-local without destructor lives as
    // long as its thread, and `Active` is `!Sync` (it holds `Cell`s), so
    // the reference cannot leave this thread, which is alive while it uses
    // it.
    ACTIVE.with(|a| unsafe { &*(a as *const Active) })
}

/// Under loom, the models pass their own `Active` to the protocol's
/// functions; nothing takes this path.
#[cfg(async_stack_loom)]
pub(crate) fn current() -> &'static Active {
    unreachable!("the loom models pass their thread state explicitly")
}

/// Bits of a slot number: a frame's index in its task's published stack
/// (see [`crate::task::stack`]), which the current-frame word carries.
pub(crate) const SLOT_BITS: u32 = 6;
/// "No slot": a frame that has none (deeper than the published stack, or
/// in an untracked task).
pub(crate) const NO_SLOT: u32 = (1 << SLOT_BITS) - 1;

/// Where a frame's slot goes in the current-frame word.
#[cfg(target_arch = "x86_64")]
pub(crate) const SLOT_SHIFT: u32 = 58;

/// The current-frame word for `frame`, in slot `slot` of its task.
#[inline(always)]
pub(crate) fn tag(frame: &AsyncStackFrame, slot: u32) -> *mut AsyncStackFrame {
    let p = std::ptr::from_ref(frame).cast_mut();
    #[cfg(target_arch = "x86_64")]
    {
        debug_assert_eq!(p.addr() >> SLOT_SHIFT, 0, "a user-space address");
        // The tag bits of `p` are clear: adding sets them, in one
        // instruction (`map_addr` with an or keeps the provenance through
        // a subtraction, which costs three).
        p.wrapping_byte_add((slot as usize) << SLOT_SHIFT)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = slot;
        p
    }
}

/// The frame of a current-frame word.
#[inline(always)]
pub(crate) fn untag(word: *mut AsyncStackFrame) -> *mut AsyncStackFrame {
    #[cfg(target_arch = "x86_64")]
    {
        word.wrapping_byte_sub(word.addr() & !((1 << SLOT_SHIFT) - 1))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        word
    }
}

/// The slot a reader finds running in a current-frame word (`NO_SLOT`
/// where the word carries none).
#[inline]
pub(crate) fn current_slot(word: *mut AsyncStackFrame) -> u32 {
    if word.is_null() {
        return NO_SLOT;
    }
    #[cfg(target_arch = "x86_64")]
    {
        (word.addr() >> SLOT_SHIFT) as u32
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        NO_SLOT
    }
}
