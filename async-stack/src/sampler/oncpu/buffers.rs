//! The on-CPU sample buffers: one ring of [`Sample`]s per sampled
//! thread, allocated once, never freed, listed in [`BUFS`] and reused
//! through a free list (see "Buffers" and "Ownership" in
//! [`crate::sampler::oncpu`]).

// Statics the signal handler reads, on a platform loom does not model
// (on-CPU sampling is off under loom): `std` atomics, as loom's cannot be
// `static`s.
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::record::current::Active;
use crate::sampler::ring::OwnedRing;
use crate::shim::lock;
use crate::task::STACK_CAPACITY;
use crate::task::stack::SignalCopy;

/// Samples a thread's buffer holds until the sampler drains it: at the
/// kernel's usual timer resolution (250 Hz), a quarter of a second of a
/// thread's CPU time.
pub(crate) const RING: usize = 64;
/// Native frames a sample keeps.
pub(crate) const MAX_NATIVE: usize = 64;
/// Async frames a sample keeps.
pub(crate) const MAX_LIVE: usize = STACK_CAPACITY;
/// The most buffers (threads sampled at once).
const MAX_BUFS: usize = 4096;
/// What the handler captured.
#[derive(Clone, Copy)]
pub(crate) struct Sample {
    /// The interrupted address, then return addresses, innermost first.
    pub(crate) native: [usize; MAX_NATIVE],
    pub(crate) n_native: u32,
    /// Site ids of the live chain, innermost first (`0`: a site never
    /// interned).
    pub(crate) live: [u32; MAX_LIVE],
    pub(crate) n_live: u32,
    /// The chain went on past [`MAX_LIVE`].
    pub(crate) live_cut: bool,
    /// The address of the task's record (`0`: no tracked task was being
    /// polled): a number the sampler thread turns into the record's index
    /// ([`crate::task::registry::index_of`]), never a pointer.
    pub(crate) record: usize,
    pub(crate) task_id: u64,
    /// The current-frame word.
    pub(crate) running: usize,
    /// Whether `copy` holds the published stack.
    pub(crate) copied: bool,
    pub(crate) copy: SignalCopy,
    pub(crate) handler_ns: u64,
}

/// One thread's ring of samples (see the module docs).
pub(crate) struct ThreadBuf {
    /// The owner's state, and its stack's bounds (`0`, `0`: unknown):
    /// written only while the sampler thread holds `ring`, with no owner.
    pub(super) active: AtomicPtr<Active>,
    pub(super) stack_lo: AtomicUsize,
    pub(super) stack_hi: AtomicUsize,
    /// The samples, lent to the owner's thread id (see
    /// [`crate::sampler::ring`]).
    pub(super) ring: OwnedRing<Sample, RING>,
}

/// Every buffer ever allocated.
static BUFS: [AtomicPtr<ThreadBuf>; MAX_BUFS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_BUFS];
static BUF_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Buffers no thread owns. Whoever takes one holds its ring and empties
/// it first: a buffer a stopping session could not hold may still get a
/// late sample.
static FREE: Mutex<Vec<&'static ThreadBuf>> = Mutex::new(Vec::new());
/// Holds `buf`'s ring for the sampler thread, waiting up to `wait` for a
/// handler to leave.
pub(super) fn hold_within(buf: &ThreadBuf, wait: Duration) -> bool {
    let start = Instant::now();
    while !buf.ring.try_hold() {
        if start.elapsed() >= wait {
            return false;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    true
}

/// A buffer no thread owns, held and empty: a free one, or a new one.
/// `None` when [`MAX_BUFS`] are in use.
pub(super) fn take_buf() -> Option<&'static ThreadBuf> {
    let reused = {
        let mut free = lock(&FREE);
        // A buffer a stale handler is looking at stays for later.
        free.iter()
            .rposition(|b| b.ring.try_hold())
            .map(|i| free.swap_remove(i))
    };
    if let Some(b) = reused {
        b.ring.reset();
        return Some(b);
    }
    let i = BUF_COUNT.load(Ordering::Relaxed);
    if i >= MAX_BUFS {
        return None;
    }
    let buf: &'static ThreadBuf = Box::leak(Box::new(ThreadBuf {
        active: AtomicPtr::new(std::ptr::null_mut()),
        stack_lo: AtomicUsize::new(0),
        stack_hi: AtomicUsize::new(0),
        ring: OwnedRing::new_held(),
    }));
    BUFS[i].store(std::ptr::from_ref(buf).cast_mut(), Ordering::Release);
    // Only the sampler thread allocates (one session at a time).
    BUF_COUNT.store(i + 1, Ordering::Release);
    Some(buf)
}

/// Gives back a buffer with no owner; `held` if the caller holds its
/// ring, which this lets go.
pub(super) fn free_buf(buf: &'static ThreadBuf, held: bool) {
    if held {
        buf.ring.unhold();
    }
    lock(&FREE).push(buf);
}

pub(super) fn is_buf(p: *const ThreadBuf) -> bool {
    let n = BUF_COUNT.load(Ordering::Acquire);
    BUFS[..n]
        .iter()
        .any(|b| std::ptr::eq(b.load(Ordering::Relaxed), p))
}

/// See [`crate::sampler::__faults::on_cpu_buffers_allocated`].
pub(crate) fn buffers_allocated() -> usize {
    BUF_COUNT.load(Ordering::Acquire)
}

/// The calling thread's buffer, if it has one now (tests only).
pub(super) fn own_buf() -> Option<&'static ThreadBuf> {
    // SAFETY: `gettid` takes no argument and cannot fail.
    let me = unsafe { libc::gettid() } as u32;
    let n = BUF_COUNT.load(Ordering::Acquire);
    BUFS[..n]
        .iter()
        // SAFETY: listed buffers are never freed.
        .map(|b| unsafe { &*b.load(Ordering::Acquire) })
        .find(|b| b.ring.is_owned_by(me))
}
