//! **Thread roots**: a process-wide list that maps each OS thread that
//! polls task roots to its thread state ([`Active`]) and its stack, for
//! readers that cannot reach a thread-local: debugger scripts reading a
//! live process or a core file (see [`crate::debug`]), and the on-CPU
//! sampler, which gives each listed thread a timer.
//!
//! # Protocol
//!
//! - The list is an [`Arena`] of [`ThreadRoot`] entries: pages that are
//!   never freed, named by a page table, a count of entries handed out, and
//!   a free list of entries given back.
//! - A thread registers the first time it polls a task root, when it first
//!   reads its OS thread id ([`thread_id`], cold). It takes a free
//!   entry (one left by an exited thread) or a new one, and fills it.
//! - When the thread exits, a thread-local guard clears the entry (id
//!   first, then the address) and gives it back for the next thread.
//! - Every fill and clear is bracketed by two increments of the entry's
//!   `generation` (odd while it is rewritten), and every access to the
//!   entry's words is sequentially consistent (a fill or clear happens
//!   once per thread: cost is no concern). So [`ThreadRoot::read`], which
//!   reads the generation, the words, then the generation again, and
//!   keeps what it read only if both generations are the same even
//!   number, returns words that one registration wrote together: never an
//!   id with a null or foreign state address, whatever thread exits or
//!   registers meanwhile.
//! - A debugger reading a stopped process sees each entry whole (it reads
//!   `tid` and `active` by their offsets). An in-process reader must treat
//!   the `Active` address as valid only while the entry still names the
//!   same thread: the sampler dereferences it only in its signal handler,
//!   on that thread (see [`crate::sampler`]).
//!
//! Not built under loom: the models pass their thread state explicitly.

use std::cell::Cell;
// std's atomics: this file is not built under loom (above); its protocol
// is sequentially consistent throughout, and a stress test races a reader
// with a writer.
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::pages::{Arena, PAGE};
use crate::record::current::Active;

/// One thread's entry. `#[repr(C)]` for debugger scripts.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct ThreadRoot {
    /// The thread's id ([`thread_number`]: its OS id on Linux); `0` for a
    /// free entry.
    pub(crate) tid: AtomicU32,
    /// Incremented before and after each fill and clear: odd while the
    /// entry is rewritten (see the module docs).
    generation: AtomicU32,
    /// The thread's [`Active`], in its thread-local storage.
    pub(crate) active: AtomicPtr<Active>,
    /// The lowest and one past the highest address of the thread's stack
    /// (`0`, `0` when unknown), so that the sampler's signal handler never
    /// reads outside it while following frame pointers.
    stack_lo: AtomicUsize,
    stack_hi: AtomicUsize,
}

/// What one registration wrote into a [`ThreadRoot`], read whole (by the
/// on-CPU sampler, on Linux, and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct Listed {
    /// The thread's id ([`thread_number`], never `0`).
    pub(crate) tid: u32,
    /// The entry's generation: another registration of the same entry,
    /// even by a thread with the same id, has another.
    pub(crate) generation: u32,
    /// The thread's state (never null), valid while the thread lives.
    pub(crate) active: *mut Active,
    /// The thread's stack, lowest address and one past the highest
    /// (`0`, `0` when unknown).
    pub(crate) stack_lo: usize,
    pub(crate) stack_hi: usize,
}

impl ThreadRoot {
    fn free() -> Self {
        ThreadRoot {
            tid: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            active: AtomicPtr::new(std::ptr::null_mut()),
            stack_lo: AtomicUsize::new(0),
            stack_hi: AtomicUsize::new(0),
        }
    }

    /// Lists thread `tid` (not `0`), whose state is `active` (not null),
    /// in this free entry. Only the entry's owner writes it.
    fn fill(&self, tid: u32, active: *mut Active, (lo, hi): (usize, usize)) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.active.store(active, Ordering::SeqCst);
        self.stack_lo.store(lo, Ordering::SeqCst);
        self.stack_hi.store(hi, Ordering::SeqCst);
        self.tid.store(tid, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Frees this entry. Only the entry's owner writes it.
    fn clear(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.tid.store(0, Ordering::SeqCst);
        self.active.store(std::ptr::null_mut(), Ordering::SeqCst);
        self.stack_lo.store(0, Ordering::SeqCst);
        self.stack_hi.store(0, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The thread this entry lists, as one registration wrote it; `None`
    /// for a free entry or one being rewritten (read again later).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn read(&self) -> Option<Listed> {
        let generation = self.generation.load(Ordering::SeqCst);
        if generation % 2 == 1 {
            return None;
        }
        let listed = Listed {
            tid: self.tid.load(Ordering::SeqCst),
            generation,
            active: self.active.load(Ordering::SeqCst),
            stack_lo: self.stack_lo.load(Ordering::SeqCst),
            stack_hi: self.stack_hi.load(Ordering::SeqCst),
        };
        // Every store to the entry sits between two increments of
        // `generation`, and all of them are in one total order with these
        // loads: if no increment came between the two loads of
        // `generation` (and the first found no rewrite under way), every
        // word read was written by the same, finished registration.
        let again = self.generation.load(Ordering::SeqCst);
        (again == generation && listed.tid != 0 && !listed.active.is_null()).then_some(listed)
    }
}

/// The most threads listed at once; a thread that finds the list full is
/// not listed (its tasks still work, and still show in `async-tasks`).
pub(crate) const MAX_THREADS: usize = 1 << 16;

/// The list's page table and its count of entries handed out: statics,
/// so that the debug descriptor holds their addresses from the start.
pub(crate) static THREAD_PAGES: [AtomicPtr<ThreadRoot>; MAX_THREADS.div_ceil(PAGE)] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_THREADS.div_ceil(PAGE)];
pub(crate) static THREAD_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Every thread that has polled a task root and not exited.
pub(crate) fn roots() -> &'static Arena<ThreadRoot> {
    static ROOTS: OnceLock<Arena<ThreadRoot>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        Arena::with_pages(&THREAD_PAGES, &THREAD_COUNT, MAX_THREADS, ThreadRoot::free)
    })
}

/// Clears this thread's entry when the thread exits.
struct Registration(Cell<Option<usize>>);

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(index) = self.0.get() else {
            return;
        };
        if let Some(entry) = roots().get(index) {
            entry.clear();
            roots().release(index);
        }
    }
}

thread_local! {
    static REGISTRATION: Registration = const { Registration(Cell::new(None)) };
}

/// This thread's id (see [`thread_number`]), read once, on the first task
/// poll of the thread, which also lists the thread here. Never `0` after
/// that poll, so the check above stays one compare on every later one.
#[inline(always)]
pub(crate) fn thread_id(a: &Active) -> u32 {
    let id = a.thread.get();
    if id != 0 {
        return id;
    }
    first_task_poll(a)
}

#[cold]
#[inline(never)]
fn first_task_poll(a: &Active) -> u32 {
    let id = thread_number();
    a.thread.set(id);
    register(a, id);
    id
}

/// The calling thread's id in the list, never `0`: its OS id on Linux
/// (`gettid`, which debuggers show and the on-CPU timers target), and
/// elsewhere a number of the process's own ([`next_number`]), which only
/// tells threads apart (the debugger scripts, tested on Linux, match
/// threads by OS id).
#[cold]
fn thread_number() -> u32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid` takes no argument and cannot fail.
        let id = unsafe { libc::gettid() };
        if let Ok(id @ 1..) = u32::try_from(id) {
            return id;
        }
    }
    next_number(&NEXT_NUMBER)
}

/// The next thread number off `next`: `1`, `2`, ..., skipping `0` when the
/// count wraps.
fn next_number(next: &AtomicU32) -> u32 {
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n != 0 {
            return n;
        }
    }
}

static NEXT_NUMBER: AtomicU32 = AtomicU32::new(1);

/// Registers the calling thread, whose state is `active` and id `tid`.
/// Does nothing if it is registered already, during thread teardown, or
/// when the list is full.
#[cold]
pub(crate) fn register(active: &Active, tid: u32) {
    register_in(roots(), active, tid);
}

/// [`register`] in `list`. An id of `0` takes no entry: the thread's first
/// task poll would then come back here on every poll, and each entry
/// taken and never filled would be lost until the list was full.
fn register_in(list: &Arena<ThreadRoot>, active: &Active, tid: u32) {
    if tid == 0 {
        return;
    }
    let _ = REGISTRATION.try_with(|r| {
        if r.0.get().is_some() {
            return;
        }
        let Some(index) = list.alloc() else {
            return;
        };
        let Some(entry) = list.get(index) else {
            return;
        };
        entry.fill(tid, std::ptr::from_ref(active).cast_mut(), stack_bounds());
        r.0.set(Some(index));
    });
}

/// The calling thread's stack, as its lowest address and one past its
/// highest; `(0, 0)` when unknown.
fn stack_bounds() -> (usize, usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `attr` is initialised by `pthread_getattr_np` before it
        // is read, and destroyed once; the out-pointers are valid.
        unsafe {
            let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
            if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
                return (0, 0);
            }
            let mut addr = std::ptr::null_mut();
            let mut size = 0;
            let rc = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
            libc::pthread_attr_destroy(attr.as_mut_ptr());
            if rc != 0 {
                return (0, 0);
            }
            (addr as usize, (addr as usize).saturating_add(size))
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        (0, 0)
    }
}

/// The registered threads, as `(OS id, state address)`: for tests.
/// Whether the calling thread is listed.
#[cfg(test)]
pub(crate) fn is_registered() -> bool {
    REGISTRATION.with(|r| r.0.get()).is_some()
}

/// Every listed thread's id and state address.
#[cfg(test)]
pub(crate) fn registered() -> Vec<(u32, *const Active)> {
    (0..roots().len())
        .filter_map(|i| roots().get(i))
        .filter_map(ThreadRoot::read)
        .map(|l| (l.tid, l.active.cast_const()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader never sees an entry half-written: while one thread fills
    /// and clears an entry over and over, with each fill's words derived
    /// from its thread id, every read gives words of one fill, never an
    /// id with a null or another fill's state or stack. (Reading the id
    /// and then the state, as the sampler did, gave ids with a null
    /// state.)
    #[test]
    fn a_reader_sees_one_registration_whole_or_none() {
        use std::sync::atomic::AtomicBool;
        let entry: &'static ThreadRoot = Box::leak(Box::new(ThreadRoot::free()));
        static STOP: AtomicBool = AtomicBool::new(false);
        let writer = std::thread::spawn(move || {
            let mut tid = 1u32;
            while !STOP.load(Ordering::Relaxed) {
                let active = std::ptr::without_provenance_mut::<Active>(tid as usize * 64);
                entry.fill(
                    tid,
                    active,
                    (tid as usize * 4096, tid as usize * 4096 + 4096),
                );
                entry.clear();
                tid = tid % 1_000_000 + 1;
            }
        });
        // At least 2,000,000 reads, and on until 1,000 of them saw a
        // filled entry: on a loaded machine the writer may not run at
        // all during the first reads. The bound only ends a run whose
        // writer never fills (a bug), rather than hang.
        let (mut whole, mut reads) = (0u64, 0u64);
        while (reads < 2_000_000 || whole < 1_000) && reads < 1_000_000_000 {
            reads += 1;
            if let Some(l) = entry.read() {
                whole += 1;
                assert_eq!(l.active.addr(), l.tid as usize * 64, "{l:?}");
                assert_eq!(l.stack_lo, l.tid as usize * 4096, "{l:?}");
                assert_eq!(l.stack_hi, l.stack_lo + 4096, "{l:?}");
                assert_eq!(l.generation % 2, 0);
            }
        }
        STOP.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert!(whole >= 1_000, "the reader saw {whole} filled entries");
    }

    /// A thread number is never `0`, also when the count wraps, and two
    /// threads never get the same one from the count.
    #[test]
    fn thread_numbers_are_never_zero() {
        assert_ne!(thread_number(), 0);
        let next = AtomicU32::new(u32::MAX - 1);
        let got: Vec<u32> = (0..4).map(|_| next_number(&next)).collect();
        assert_eq!(got, [u32::MAX - 1, u32::MAX, 1, 2]);
        let firsts: Vec<u32> = (0..8)
            .map(|_| std::thread::spawn(|| next_number(&NEXT_NUMBER)))
            .map(|t| t.join().unwrap())
            .collect();
        let mut unique = firsts.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), firsts.len(), "{firsts:?}");
    }

    /// A thread whose id is `0` (none could be read) is not listed and
    /// takes no entry, however often it polls: before, each of its task
    /// polls took an entry and never gave it back.
    #[test]
    fn an_id_of_zero_takes_no_entry() {
        let list = Arena::new(MAX_THREADS, ThreadRoot::free);
        std::thread::spawn(move || {
            let active = crate::record::current::current();
            for _ in 0..100 {
                register_in(&list, active, 0);
            }
            assert!(!is_registered());
            assert_eq!(list.alloc(), Some(0), "no entry was taken");
        })
        .join()
        .unwrap();
    }

    /// An entry given back is the next one taken; the list grows only
    /// when none is free.
    #[test]
    fn entries_given_back_are_taken_again_before_the_list_grows() {
        let list = Arena::new(MAX_THREADS, ThreadRoot::free);
        let a = list.alloc().unwrap();
        let b = list.alloc().unwrap();
        assert_eq!((a, b), (0, 1));
        list.release(a);
        assert_eq!(list.alloc(), Some(a));
        assert_eq!(list.alloc(), Some(2));
        assert_eq!(list.len(), 3);
    }
}
