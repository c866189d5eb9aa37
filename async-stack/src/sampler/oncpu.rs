//! On-CPU sampling (Linux): a timer on each polling thread's CPU-time
//! clock, and the signal handler that captures, from one instant, the
//! thread's native frames and its async chain.
//!
//! # Protocol
//!
//! - **The signal.** Timers raise a real-time signal, not `SIGPROF`, which
//!   `setitimer`-based profilers (pprof-rs and its kin) own: they install
//!   their own `SIGPROF` handler, and leave the signal ignored when they
//!   stop. The first session picks the highest real-time signal that has
//!   its default disposition and that the starting thread does not block
//!   (a program that waits for a signal with `sigwait` or `signalfd`
//!   blocks it), and installs [`on_signal`] for it; the
//!   handler stays installed for the process's life (a signal from a timer
//!   deleted a moment earlier may still be pending, and a real-time
//!   signal's default action ends the process). Every session start checks
//!   that the handler is still ours: it reinstalls it over a default or
//!   ignored disposition, and picks another free signal if another
//!   handler took it. Every tenth of a second the sampler thread checks
//!   again (and reinstalls it over a default or ignored disposition).
//! - **Buffers.** Each sampled thread has a [`ThreadBuf`]: a ring of
//!   [`RING`] samples with one producer (the handler, on that thread) and
//!   one consumer (the sampler thread). Buffers are allocated once and
//!   never freed (a signal may still be pending when a timer is deleted),
//!   listed in [`BUFS`] so that the handler can check a pointer it is
//!   given, and reused through a free list: the number allocated is the
//!   most threads sampled at once, whatever the number of threads that
//!   came and went.
//! - **Ownership.** A buffer's ring is an [`OwnedRing`], lent to the
//!   thread id of the thread it samples (see [`super::ring`]): the
//!   handler pushes only into a ring its own thread owns, while holding
//!   it, and the sampler thread writes the buffer's other fields (the
//!   owner's [`Active`] and stack bounds) only while it holds the ring
//!   with no owner. So while a handler pushes, those fields are its
//!   thread's, and stay so.
//! - **Timers.** On each tick the sampler thread reads the list of
//!   [`crate::record::threads`] whole, entry by entry
//!   ([`ThreadRoot::read`](crate::record::threads::ThreadRoot::read)), gives
//!   each new thread a buffer and a timer (`timer_create` on the thread's
//!   CPU-time clock, `SIGEV_THREAD_ID`, the buffer's address in the
//!   signal's value), and **retires** the buffer of each thread that is
//!   gone: it deletes the timer, revokes the ring, and once it holds the
//!   ring (no handler inside, and none will push again: a handler still
//!   inside, its thread about to exit, makes it try again on the next
//!   tick) drains what is left into the profile and frees the buffer.
//! - **The handler** checks the signal came from one of our timers
//!   (`SI_TIMER`, a listed buffer), then pushes into the ring as its
//!   thread's id: the push captures the sample into the next slot if the
//!   ring is its thread's and has room, else counts the sample lost
//!   (which the sampler takes each time it drains).
//! - **What the handler reads.** The interrupted registers (from the
//!   signal's context); the thread's stack, word by word through an `asm!`
//!   load (the bytes there are not Rust values the handler may assume
//!   initialised), and only when the interrupted stack pointer lies inside
//!   the thread's own stack, between it and the stack's top: code running
//!   on another stack (a coroutine, a `stacker` segment, a handler on a
//!   `sigaltstack`) gets its interrupted address only, whatever its frame
//!   pointer holds; the thread's [`Active`] state and the frames reachable
//!   from its current-frame word, which the thread keeps whole for its
//!   own signal handlers (see [`crate::record::current`]); and the
//!   published stack of the task being polled, which only this thread
//!   writes ([`TaskRecord::copy_in_signal`]).
//! - **Signals that stop arriving.** A thread can block the signal, or
//!   another handler can take it. Every tenth of a second the sampler
//!   thread reads each sampled thread's CPU time: a thread that ran
//!   [`SILENT_PERIODS`] periods (and at least [`SILENT_NS`]) of CPU time
//!   since its handler last took a signal has stopped getting them, and
//!   each period it ran since is counted in `signals_lost`.
//!
//! The handler allocates nothing, takes no lock, and calls only
//! `gettid` and `clock_gettime`, both async-signal-safe.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::profile::RawFrame;
use super::ring::OwnedRing;
use super::wall::{Sampling, site_frame};
use super::{MAX_DEPTH, SampleState, Weights};
use crate::record::current::Active;
use crate::record::threads::Listed;
use crate::task::STACK_CAPACITY;
use crate::task::record::TaskRecord;
use crate::task::registry;
use crate::task::stack::{SignalCopy, StackCopy};

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
/// Periods of CPU time a thread runs with no signal before its signals
/// count as stopped.
const SILENT_PERIODS: u64 = 8;
/// The least CPU time a thread runs with no signal before its signals
/// count as stopped: well above the kernel's timer resolution (at most
/// 10 ms), which delays CPU-time timers.
const SILENT_NS: u64 = 100_000_000;
/// How long a stopping session waits for a handler to leave a buffer.
const STOP_WAIT: Duration = Duration::from_millis(100);

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
    /// ([`registry::index_of`]), never a pointer.
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
    active: AtomicPtr<Active>,
    stack_lo: AtomicUsize,
    stack_hi: AtomicUsize,
    /// The samples, lent to the owner's thread id (see [`super::ring`]).
    ring: OwnedRing<Sample, RING>,
}

/// Every buffer ever allocated.
static BUFS: [AtomicPtr<ThreadBuf>; MAX_BUFS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_BUFS];
static BUF_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Buffers no thread owns. Whoever takes one holds its ring and empties
/// it first: a buffer a stopping session could not hold may still get a
/// late sample.
static FREE: Mutex<Vec<&'static ThreadBuf>> = Mutex::new(Vec::new());
/// Whether a session is running (one per process): set by
/// [`Session::start`], cleared when the session is dropped, however its
/// sampler thread ends.
static SESSION: AtomicBool = AtomicBool::new(false);
/// The signal our timers raise and our handler is installed for (`0`:
/// none yet).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Holds `buf`'s ring for the sampler thread, waiting up to `wait` for a
/// handler to leave.
fn hold_within(buf: &ThreadBuf, wait: Duration) -> bool {
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
fn take_buf() -> Option<&'static ThreadBuf> {
    let reused = {
        let mut free = FREE.lock().unwrap_or_else(PoisonError::into_inner);
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
fn free_buf(buf: &'static ThreadBuf, held: bool) {
    if held {
        buf.ring.unhold();
    }
    FREE.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(buf);
}

fn is_buf(p: *const ThreadBuf) -> bool {
    let n = BUF_COUNT.load(Ordering::Acquire);
    BUFS[..n]
        .iter()
        .any(|b| std::ptr::eq(b.load(Ordering::Relaxed), p))
}

/// A timer id, used only by the sampler thread.
struct TimerId(libc::timer_t);

// SAFETY: a POSIX timer id is a process-wide handle, valid from any
// thread.
unsafe impl Send for TimerId {}

/// One sampled thread.
struct Timer {
    tid: u32,
    /// The generation of the thread's entry in the thread list.
    generation: u32,
    id: TimerId,
    buf: &'static ThreadBuf,
    /// Signals the handler took for this thread (samples drained and
    /// samples lost).
    taken: u64,
    /// `taken` and the thread's CPU time when a signal was last seen to
    /// have arrived, or the timer was made; the CPU time moves on by the
    /// periods counted lost.
    mark_taken: u64,
    mark_cpu: u64,
}

/// The on-CPU timers of one sampler run. Dropping it (the sampler thread
/// ends, panics, or never started) deletes its timers, gives back its
/// buffers and ends the process's session.
pub(crate) struct Session {
    period_ns: u64,
    signal: libc::c_int,
    /// By index in the thread list.
    timers: Vec<Option<Timer>>,
    /// Buffers of threads that are gone, to drain once no handler is
    /// inside.
    retiring: Vec<&'static ThreadBuf>,
    /// Drains so far, and drains between checks for stopped signals.
    drains: u64,
    check_every: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("period_ns", &self.period_ns)
            .field("signal", &self.signal)
            .field("threads", &self.timers.iter().flatten().count())
            .finish()
    }
}

impl Session {
    /// Claims the process's session and makes sure our handler holds the
    /// timers' signal.
    pub(crate) fn start(hz: u32) -> io::Result<Session> {
        if SESSION.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "an on-CPU sampler is already running in this process",
            ));
        }
        // From here on, dropping `session` gives the claim back.
        let mut session = Session {
            period_ns: 1_000_000_000 / u64::from(hz),
            signal: 0,
            timers: Vec::new(),
            retiring: Vec::new(),
            drains: 0,
            check_every: u64::from(hz / 10).max(1),
        };
        session.signal = claim_signal()?;
        // Load the symbols of this binary now, not while the first
        // samples wait in their buffers: the first lookup reads its debug
        // information.
        let _ = crate::read::symbolize::resolve(on_signal as *const () as usize);
        let _ = super::native::Modules::new().resolve(on_signal as *const () as usize);
        Ok(session)
    }

    /// Gives every listed thread a timer, and retires those of threads
    /// that are gone.
    fn sync_threads(&mut self) {
        let roots = crate::record::threads::roots();
        let n = roots.len();
        if self.timers.len() < n {
            self.timers.resize_with(n, || None);
        }
        for i in 0..n {
            let listed = roots.get(i).and_then(|e| e.read());
            let same = match (&self.timers[i], &listed) {
                (Some(t), Some(l)) => t.tid == l.tid && t.generation == l.generation,
                (Some(_), None) => false,
                (None, _) => true,
            };
            if !same && let Some(t) = self.timers[i].take() {
                self.retire(t);
            }
            if self.timers[i].is_none()
                && let Some(l) = listed
            {
                self.timers[i] = arm(&l, self.period_ns, self.signal);
            }
        }
    }

    /// Deletes `t`'s timer and queues its buffer to be drained.
    fn retire(&mut self, t: Timer) {
        delete(&t);
        self.retiring.push(t.buf);
    }

    /// Deletes every timer: the buffers to drain and give back.
    fn retire_all(&mut self) -> Vec<&'static ThreadBuf> {
        let timers: Vec<Timer> = self.timers.drain(..).flatten().collect();
        for t in timers {
            self.retire(t);
        }
        std::mem::take(&mut self.retiring)
    }

    /// The periods of CPU time threads ran since their signals stopped
    /// arriving (see the module docs).
    fn count_silent(&mut self) -> u64 {
        keep_handler(self.signal);
        let period = self.period_ns;
        let silent = (SILENT_PERIODS * period).max(SILENT_NS);
        let mut missing = 0;
        for t in self.timers.iter_mut().flatten() {
            let Some(cpu) = thread_cpu_ns(t.tid) else {
                continue;
            };
            if t.taken != t.mark_taken {
                t.mark_taken = t.taken;
                t.mark_cpu = cpu;
                continue;
            }
            let ran = cpu.saturating_sub(t.mark_cpu);
            if ran >= silent {
                let periods = ran / period;
                missing += periods;
                t.mark_cpu += periods * period;
            }
        }
        missing
    }
}

impl Drop for Session {
    /// Without a profile to drain into (the sampler thread panicked or
    /// never started): deletes the timers, empties the buffers and gives
    /// them back, then ends the session.
    fn drop(&mut self) {
        for b in self.retire_all() {
            let held = hold_within(b, STOP_WAIT);
            if held {
                b.ring.reset();
            }
            free_buf(b, held);
        }
        SESSION.store(false, Ordering::Release);
    }
}

/// Gives the thread `l` lists a buffer and a timer.
fn arm(l: &Listed, period_ns: u64, signal: libc::c_int) -> Option<Timer> {
    let buf = take_buf()?;
    // Held with no owner: no handler reads these now, and the owner's
    // handler sees them once it holds the ring.
    buf.active.store(l.active, Ordering::Relaxed);
    buf.stack_lo.store(l.stack_lo, Ordering::Relaxed);
    buf.stack_hi.store(l.stack_hi, Ordering::Relaxed);
    buf.ring.hand_to(l.tid);
    let mark_cpu = thread_cpu_ns(l.tid).unwrap_or(0);
    let Some(id) = create(l.tid, buf, period_ns, signal) else {
        buf.ring.revoke();
        // No timer: no handler can hold it for long.
        let held = hold_within(buf, STOP_WAIT);
        free_buf(buf, held);
        return None;
    };
    Some(Timer {
        tid: l.tid,
        generation: l.generation,
        id,
        buf,
        taken: 0,
        mark_taken: 0,
        mark_cpu,
    })
}

/// Deletes a thread's timer and takes the buffer from the thread; what
/// the buffer holds is drained later.
fn delete(t: &Timer) {
    // SAFETY: `t.id` came from a successful `timer_create` and is deleted
    // once (a timer is deleted only when it leaves its session's list).
    unsafe { libc::timer_delete(t.id.0) };
    t.buf.ring.revoke();
}

/// The CPU-time clock of thread `tid` (Linux's encoding of a per-thread
/// clock: `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
fn thread_clock(tid: u32) -> libc::clockid_t {
    ((!(tid as libc::clockid_t)) << 3) | 6
}

/// The CPU time of thread `tid` of this process, if it still runs.
fn thread_cpu_ns(tid: u32) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec; the kernel checks the clock id (a thread
    // of another process, or one that exited, is refused).
    if unsafe { libc::clock_gettime(thread_clock(tid), &mut ts) } != 0 {
        return None;
    }
    Some((ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64)
}

fn create(
    tid: u32,
    buf: &'static ThreadBuf,
    period_ns: u64,
    signal: libc::c_int,
) -> Option<TimerId> {
    // SAFETY: a zeroed `sigevent` is a valid value (all integers and a
    // pointer union); the fields set below are the ones `SIGEV_THREAD_ID`
    // reads.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = signal;
    sev.sigev_notify_thread_id = tid as libc::c_int;
    sev.sigev_value = libc::sigval {
        sival_ptr: std::ptr::from_ref(buf).cast_mut().cast(),
    };
    let mut id: libc::timer_t = std::ptr::null_mut();
    // SAFETY: valid pointers to a sigevent and a timer id.
    if unsafe { libc::timer_create(thread_clock(tid), &mut sev, &mut id) } != 0 {
        return None;
    }
    let ts = libc::timespec {
        tv_sec: (period_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (period_ns % 1_000_000_000) as libc::c_long,
    };
    let its = libc::itimerspec {
        it_interval: ts,
        it_value: ts,
    };
    // SAFETY: `id` is a timer just created; `its` is valid.
    if unsafe { libc::timer_settime(id, 0, &its, std::ptr::null_mut()) } != 0 {
        // SAFETY: as above; deleted once.
        unsafe { libc::timer_delete(id) };
        return None;
    }
    Some(TimerId(id))
}

/// Who handles a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disposition {
    Default,
    Ignored,
    Ours,
    Other,
}

fn disposition_of(sa: &libc::sigaction) -> Disposition {
    match sa.sa_sigaction {
        libc::SIG_DFL => Disposition::Default,
        libc::SIG_IGN => Disposition::Ignored,
        h if h == on_signal as *const () as usize => Disposition::Ours,
        _ => Disposition::Other,
    }
}

/// The current action for `sig`.
fn action(sig: libc::c_int) -> io::Result<libc::sigaction> {
    // SAFETY: a zeroed `sigaction` is a valid out-value; `sigaction` with
    // a null new action only reads.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(old)
    }
}

/// Installs our handler for `sig`, if what held it was a default or
/// ignored disposition, or ours (else puts the other handler back):
/// whether our handler holds `sig` now.
fn install(sig: libc::c_int) -> io::Result<bool> {
    // SAFETY: `sigaction` with valid pointers; the handler has the
    // `SA_SIGINFO` signature. The exchange is atomic, so a handler
    // installed by another thread since we looked is put back whole.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, &sa, &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        if disposition_of(&old) == Disposition::Other {
            libc::sigaction(sig, &old, std::ptr::null_mut());
            return Ok(false);
        }
    }
    Ok(true)
}

/// The signal for this session's timers, with our handler installed for
/// it (see the module docs).
fn claim_signal() -> io::Result<libc::c_int> {
    let current = SIGNAL.load(Ordering::Acquire);
    if current != 0 {
        match disposition_of(&action(current)?) {
            Disposition::Ours => return Ok(current),
            Disposition::Default | Disposition::Ignored if install(current)? => {
                return Ok(current);
            }
            // Another handler took it: find another.
            _ => {}
        }
    }
    // Signals the starting thread blocks are someone's: a program that
    // waits for a signal (`sigwait`, `signalfd`) blocks it and leaves its
    // disposition at the default.
    // SAFETY: a zeroed `sigset_t` is a valid out-value; a null new set
    // only reads the mask.
    let blocked = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
        set
    };
    for sig in (libc::SIGRTMIN()..=libc::SIGRTMAX()).rev() {
        // SAFETY: a valid set and signal number.
        let is_blocked = unsafe { libc::sigismember(&blocked, sig) } == 1;
        if sig != current
            && !is_blocked
            && disposition_of(&action(sig)?) == Disposition::Default
            && install(sig)?
        {
            SIGNAL.store(sig, Ordering::Release);
            return Ok(sig);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "on-CPU sampling needs a real-time signal with its default disposition, and every one \
         (SIGRTMIN to SIGRTMAX) has another handler or is ignored",
    ))
}

/// Reinstalls our handler for `sig` if something reset it to the default
/// or ignored disposition meanwhile (the default would end the process at
/// the next signal). Leaves another handler in place: its thread's
/// signals then count as stopped.
fn keep_handler(sig: libc::c_int) {
    if let Ok(a) = action(sig)
        && matches!(
            disposition_of(&a),
            Disposition::Default | Disposition::Ignored
        )
    {
        let _ = install(sig);
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec; `clock_gettime` is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

extern "C" fn on_signal(_: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the errno location of this thread, read and restored.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel passes a valid siginfo and context to an
    // `SA_SIGINFO` handler.
    unsafe { handle(&*info, ctx.cast::<libc::ucontext_t>()) };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// # Safety
///
/// `info` and `ctx` are what the kernel passed to the handler, which runs
/// on the interrupted thread.
unsafe fn handle(info: &libc::siginfo_t, ctx: *const libc::ucontext_t) {
    let t0 = monotonic_ns();
    if info.si_code != libc::SI_TIMER {
        return;
    }
    // SAFETY: a `SI_TIMER` siginfo carries the timer's `sigval`.
    let p = unsafe { info.si_value().sival_ptr }
        .cast::<ThreadBuf>()
        .cast_const();
    if !is_buf(p) {
        return;
    }
    // SAFETY: `p` is one of our buffers, which are never freed.
    let buf = unsafe { &*p };
    // SAFETY: `gettid` takes no argument and cannot fail.
    let me = unsafe { libc::gettid() } as u32;
    // SAFETY: one handler runs at a time on a thread, the only producer
    // for its id; `capture` fills the whole sample. It runs only if the
    // buffer is this thread's, held by us: then `buf.active` is this
    // thread's state, alive while it runs, and the stack bounds are this
    // thread's stack, and neither changes meanwhile. `ctx` is the
    // interrupted context. A full ring, or one changing hands while still
    // ours, counts the sample lost.
    unsafe {
        buf.ring.push_as(me, |slot| {
            capture(slot, ctx, buf);
            (*slot).handler_ns = monotonic_ns().saturating_sub(t0);
        })
    };
}

/// The interrupted program counter, frame pointer and stack pointer.
///
/// # Safety
///
/// `ctx` is a valid `ucontext_t`.
unsafe fn registers(ctx: *const libc::ucontext_t) -> (usize, usize, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller's contract.
        let g = unsafe { &(*ctx).uc_mcontext.gregs };
        (
            g[libc::REG_RIP as usize] as usize,
            g[libc::REG_RBP as usize] as usize,
            g[libc::REG_RSP as usize] as usize,
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: the caller's contract.
        let m = unsafe { &(*ctx).uc_mcontext };
        (m.pc as usize, m.regs[29] as usize, m.sp as usize)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = ctx;
        (0, 0, 0)
    }
}

/// One word of this thread's stack.
///
/// # Safety
///
/// `addr` is 8-aligned and lies in this thread's mapped stack.
#[inline(always)]
unsafe fn stack_word(addr: usize) -> usize {
    let v: usize;
    // A load outside the Rust abstract machine: the stack words between
    // frames are not values Rust may assume initialised.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract: a mapped, aligned address.
    unsafe {
        std::arch::asm!("mov {v}, qword ptr [{a}]", v = out(reg) v, a = in(reg) addr,
            options(nostack, readonly, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the caller's contract: a mapped, aligned address.
    unsafe {
        std::arch::asm!("ldr {v}, [{a}]", v = out(reg) v, a = in(reg) addr,
            options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = addr;
        v = 0;
    }
    v
}

/// Fills `s` from the interrupted context.
///
/// # Safety
///
/// As for [`handle`]'s slot write: `s` is owned by the caller, `buf` is
/// the calling thread's, held (`busy`) by the caller.
unsafe fn capture(s: *mut Sample, ctx: *const libc::ucontext_t, buf: &ThreadBuf) {
    // SAFETY: the caller's contract for every access below; see each.
    unsafe {
        // The slot may never have held a sample: make it a valid one
        // (all zeros: integers, arrays of them and `false`s) before taking
        // a reference to it.
        std::ptr::write_bytes(s, 0, 1);
        let s = &mut *s;
        // Native frames: the interrupted address, then, only if the
        // interrupted stack pointer lies in this thread's stack, frame
        // pointers, followed while each frame lies above the last and
        // below the stack's top. Code on another stack (a coroutine, a
        // `sigaltstack` handler) keeps its interrupted address only: its
        // frame pointer may point anywhere.
        let (pc, mut fp, sp) = registers(ctx);
        s.native[0] = pc;
        let mut n = 1;
        let lo = buf.stack_lo.load(Ordering::Relaxed);
        let hi = buf.stack_hi.load(Ordering::Relaxed);
        if lo <= sp && sp < hi {
            while n < MAX_NATIVE && fp >= sp && fp % 8 == 0 && fp.saturating_add(16) <= hi {
                // Between the stack pointer and the top of this thread's
                // stack, aligned: mapped memory.
                let next = stack_word(fp);
                let ret = stack_word(fp + 8);
                if ret == 0 {
                    break;
                }
                s.native[n] = ret;
                n += 1;
                if next <= fp {
                    break;
                }
                fp = next;
            }
        }
        s.n_native = n as u32;
        // The async chain and the published stack (the rest of the sample
        // is zero).
        let Some(a) = buf.active.load(Ordering::Relaxed).as_ref() else {
            return;
        };
        let cur = a.word.load(Ordering::Relaxed);
        if cur.is_null() {
            return;
        }
        std::sync::atomic::compiler_fence(Ordering::Acquire);
        // `word` points to a record's `current` (never freed) or to the
        // thread's own untracked word.
        let running = (*cur).load(Ordering::Relaxed);
        s.running = running.addr();
        // Frames reachable from the current one are alive: their polls
        // are on this thread's stack, below the interrupted instruction
        // (invariant of `current`).
        let (k, cut) = super::verify::live_chain(running, &mut s.live);
        s.n_live = k as u32;
        s.live_cut = cut;
        if let Some(r) = TaskRecord::running(a) {
            s.record = std::ptr::from_ref(r).addr();
            s.task_id = r.id.load(Ordering::Relaxed);
            s.copied = r.copy_in_signal(&mut s.copy).is_ok();
        }
    }
}

/// Set by [`hold_drain`] (tests only).
static HOLD: AtomicBool = AtomicBool::new(false);

/// See [`super::__faults::hold_on_cpu_drain`].
pub(crate) fn hold_drain(hold: bool) {
    HOLD.store(hold, Ordering::Relaxed);
}

/// See [`super::__faults::on_cpu_buffers_allocated`].
pub(crate) fn buffers_allocated() -> usize {
    BUF_COUNT.load(Ordering::Acquire)
}

/// The calling thread's buffer, if it has one now (tests only).
fn own_buf() -> Option<&'static ThreadBuf> {
    // SAFETY: `gettid` takes no argument and cannot fail.
    let me = unsafe { libc::gettid() } as u32;
    let n = BUF_COUNT.load(Ordering::Acquire);
    BUFS[..n]
        .iter()
        // SAFETY: listed buffers are never freed.
        .map(|b| unsafe { &*b.load(Ordering::Acquire) })
        .find(|b| b.ring.is_owned_by(me))
}

/// See [`super::__faults::on_cpu_sampled`].
pub(crate) fn sampled() -> bool {
    own_buf().is_some()
}

/// See [`super::__faults::on_cpu_backlog`].
pub(crate) fn backlog() -> (usize, u64) {
    own_buf().map_or((0, 0), |b| b.ring.backlog())
}

impl Sampling {
    /// Gives new threads a timer, takes in every captured sample, drains
    /// and frees the buffers of threads that are gone, and now and then
    /// counts the signals that stopped arriving.
    pub(crate) fn drain_on_cpu(&mut self) {
        if HOLD.load(Ordering::Relaxed) {
            return;
        }
        let Some(mut session) = self.on_cpu.take() else {
            return;
        };
        session.sync_threads();
        let period = session.period_ns;
        for t in session.timers.iter_mut().flatten() {
            t.taken += self.drain(t.buf, period);
        }
        session.retiring.retain(|&b| {
            if !b.ring.try_hold() {
                // Its thread is inside the handler: next tick.
                return true;
            }
            self.drain(b, period);
            free_buf(b, true);
            false
        });
        session.drains += 1;
        if session.drains % session.check_every == 0 {
            self.profile.stats.signals_lost += session.count_silent();
        }
        self.on_cpu = Some(session);
    }

    /// The session ends: deletes its timers, takes in what is left in
    /// the buffers, and gives them back.
    pub(crate) fn drain_stopped(&mut self, mut session: Session) {
        let period = session.period_ns;
        for b in session.retire_all() {
            let held = hold_within(b, STOP_WAIT);
            // The consumer may drain while a producer runs (see
            // `super::ring`); holding `busy` only makes sure none runs
            // after. A buffer not held is emptied by whoever takes it.
            self.drain(b, period);
            free_buf(b, held);
        }
        // Ends the session, now that its buffers are free.
        drop(session);
    }

    /// Takes in the samples of `b` and its count of lost ones: the
    /// signals the handler took since the last drain.
    fn drain(&mut self, b: &ThreadBuf, period_ns: u64) -> u64 {
        let mut taken = 0;
        while let Some(s) = b.ring.pop() {
            self.on_cpu_sample(&s, period_ns);
            taken += 1;
        }
        let lost = b.ring.take_lost();
        self.profile.stats.signals_lost += lost;
        taken + lost
    }

    fn on_cpu_sample(&mut self, s: &Sample, period_ns: u64) {
        let stats = &mut self.profile.stats;
        stats.signals += 1;
        stats.attempted += 1;
        stats.ok += 1;
        stats.handler_ns = stats.handler_ns.saturating_add(s.handler_ns);
        let live = &s.live[..s.n_live as usize];
        if s.live_cut || live.len() > MAX_DEPTH {
            stats.truncated += 1;
        }
        // The async frames, root first.
        let mut frames: Vec<RawFrame<'_>> = live.iter().rev().map(|&id| site_frame(id)).collect();
        // Check the live chain against the published stack.
        if s.copied && s.record != 0 && !s.live_cut {
            self.verify(s, live);
        }
        // The native frames above the innermost poll.
        let keep = native_frames_to_keep(&s.native[..s.n_native as usize]);
        let natives = self.natives(&s.native[..keep]);
        for n in natives.iter().rev() {
            frames.push(RawFrame::Native {
                module_path: &n.0,
                build_id: &n.1,
                offset: n.2,
                call: n.3,
            });
        }
        let (group, name) = if s.record == 0 || live.is_empty() {
            ("[outside tasks]".to_owned(), String::new())
        } else {
            self.labels(s)
        };
        let weights = Weights {
            samples: 1,
            wall_ns: 0,
            cpu_ns: period_ns,
        };
        self.profile.add(
            &group,
            s.task_id,
            &name,
            SampleState::OnCpu,
            &frames,
            weights,
        );
    }

    /// Compares the live chain (innermost first) with the published stack
    /// the handler copied at the same instant.
    fn verify(&mut self, s: &Sample, live: &[u32]) {
        if let Some(published) = super::verify::compare(live, &s.copy, s.running) {
            let m = super::verify::describe(s.task_id, live, &published);
            super::verify::report(&m);
            self.profile.add_mismatch(m);
        }
    }

    /// The group and name of the task a sample caught.
    fn labels(&mut self, s: &Sample) -> (String, String) {
        let now = crate::clock::system_ms();
        let mut copy = StackCopy::default();
        // The record by its index, never by the address the handler took
        // (a number, not a pointer); `read` validates the task id.
        let read = registry::index_of(s.record, &mut self.record_page)
            .and_then(|index| registry::record(index)?.read(index, &mut copy, now));
        match read {
            Some(raw) if raw.id == s.task_id => (
                super::wall::group_of(
                    raw.name.as_deref(),
                    raw.location,
                    raw.root_site,
                    self.profile.grouping,
                )
                .0
                .into_owned(),
                raw.name
                    .as_deref()
                    .map_or(String::new(), |n| n.as_str().to_owned()),
            ),
            // The task ended since: named after its root.
            _ => {
                let root = s.live[s.n_live as usize - 1];
                match site_frame(root) {
                    RawFrame::Async { function, .. } => (function.to_owned(), String::new()),
                    RawFrame::Native { .. } => (String::new(), String::new()),
                }
            }
        }
    }

    /// Module, build id, offset and whether each is a return address.
    fn natives(&mut self, pcs: &[usize]) -> Vec<(String, Vec<u8>, u64, bool)> {
        pcs.iter()
            .enumerate()
            .filter_map(|(i, &pc)| {
                let (path, build_id, offset) = self.modules.resolve(pc)?;
                Some((path.to_string(), build_id.to_vec(), offset, i > 0))
            })
            .collect()
    }
}

/// How many of the captured native frames (innermost first) belong above
/// the async chain: up to the first physical frame that holds a
/// `Traced::poll` (the innermost poll, whose inlined frames above the poll
/// export keeps). Without one, only the interrupted address, which needs
/// no unwinding to be right.
fn native_frames_to_keep(pcs: &[usize]) -> usize {
    for (i, &pc) in pcs.iter().enumerate() {
        let syms = crate::read::symbolize::resolve(pc);
        if syms.iter().any(crate::read::walker::is_level) {
            return i + 1;
        }
    }
    pcs.len().min(1)
}
