//! On-CPU sampling (Linux): a timer on each polling thread's CPU-time
//! clock, and the signal handler that captures, from one instant, the
//! thread's native frames and its async chain.
//!
//! # Protocol
//!
//! - **Buffers.** Each sampled thread has a [`ThreadBuf`]: a ring of
//!   [`RING`] samples with one producer (the handler, on that thread) and
//!   one consumer (the sampler thread). Buffers are allocated once and
//!   never freed (a signal may still be pending when a timer is deleted),
//!   listed in [`BUFS`] so that the handler can check a pointer it is
//!   given, and reused through a free list.
//! - **Timers.** On each tick the sampler thread lists the threads of
//!   [`crate::record::threads`], gives each new one a buffer and a timer
//!   (`timer_create` on the thread's CPU-time clock, `SIGEV_THREAD_ID`, the
//!   buffer's address in the signal's value), and deletes the timer of
//!   each thread that is gone.
//! - **The handler** checks the signal came from one of our timers
//!   (`SI_TIMER`, a listed buffer owned by the interrupted thread), takes
//!   the buffer's `busy` flag (a second handler, which cannot happen with
//!   one timer per thread and the signal masked during its handler, would
//!   drop its sample), and writes the next slot if the ring has room (else
//!   it counts the sample lost). It then publishes the slot by storing
//!   `head` with release ordering. The consumer reads slots below `head`
//!   (acquire) and frees them by storing `tail` (release), which the
//!   handler reads with acquire ordering before reusing a slot.
//! - **What the handler reads.** The interrupted registers (from the
//!   signal's context); the thread's stack between the interrupted stack
//!   pointer and the stack's top, word by word through an `asm!` load (the
//!   bytes there are not Rust values the handler may assume initialised);
//!   the thread's [`Active`] state and the frames reachable from its
//!   current-frame word, which the thread keeps whole for its own signal
//!   handlers (see [`crate::record::current`]); and the published stack of
//!   the task being polled, which only this thread writes
//!   ([`TaskRecord::copy_in_signal`]).
//!
//! The handler allocates nothing, takes no lock, and calls only
//! `gettid` and `clock_gettime`, both async-signal-safe.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::ring::Ring;
use std::sync::{Mutex, PoisonError};

use super::profile::RawFrame;
use super::wall::{Sampling, site_frame};
use super::{MAX_DEPTH, SampleState, Weights};
use crate::record::current::Active;
use crate::task::STACK_CAPACITY;
use crate::task::record::TaskRecord;
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
    /// The task's record (`0`: no tracked task was being polled).
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
    /// The thread that owns the buffer (`0`: none).
    tid: AtomicU32,
    active: AtomicPtr<Active>,
    stack_hi: AtomicUsize,
    busy: AtomicBool,
    lost: AtomicU64,
    /// The samples (see [`super::ring`]).
    ring: Ring<Sample, RING>,
}

/// Every buffer ever allocated.
static BUFS: [AtomicPtr<ThreadBuf>; MAX_BUFS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_BUFS];
static BUF_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Buffers not owned by any thread.
static FREE: Mutex<Vec<&'static ThreadBuf>> = Mutex::new(Vec::new());
/// Whether a session is running (one per process).
static SESSION: AtomicBool = AtomicBool::new(false);
/// Whether our handler is installed (it stays installed: see `start`).
static INSTALLED: AtomicBool = AtomicBool::new(false);

fn new_buf() -> Option<&'static ThreadBuf> {
    if let Some(b) = FREE.lock().unwrap_or_else(PoisonError::into_inner).pop() {
        return Some(b);
    }
    let i = BUF_COUNT.load(Ordering::Relaxed);
    if i >= MAX_BUFS {
        return None;
    }
    let buf: &'static ThreadBuf = Box::leak(Box::new(ThreadBuf {
        tid: AtomicU32::new(0),
        active: AtomicPtr::new(std::ptr::null_mut()),
        stack_hi: AtomicUsize::new(0),
        busy: AtomicBool::new(false),
        lost: AtomicU64::new(0),
        ring: Ring::new(),
    }));
    BUFS[i].store(std::ptr::from_ref(buf).cast_mut(), Ordering::Release);
    // Only the sampler thread allocates (one session at a time).
    BUF_COUNT.store(i + 1, Ordering::Release);
    Some(buf)
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

struct Timer {
    root: usize,
    tid: u32,
    id: TimerId,
    buf: &'static ThreadBuf,
}

/// The on-CPU timers of one sampler run.
pub(crate) struct Session {
    period_ns: u64,
    timers: Vec<Timer>,
    lost_seen: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("period_ns", &self.period_ns)
            .field("threads", &self.timers.len())
            .finish()
    }
}

impl Session {
    /// Installs the handler (once per process) and claims the session.
    pub(crate) fn start(hz: u32) -> io::Result<Session> {
        if SESSION.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "an on-CPU sampler is already running in this process",
            ));
        }
        if let Err(e) = install() {
            SESSION.store(false, Ordering::Release);
            return Err(e);
        }
        // Load the symbols of this binary now, not while the first
        // samples wait in their buffers: the first lookup reads its debug
        // information.
        let _ = crate::read::symbolize::resolve(on_signal as *const () as usize);
        let _ = super::native::Modules::new().resolve(on_signal as *const () as usize);
        Ok(Session {
            period_ns: 1_000_000_000 / u64::from(hz),
            timers: Vec::new(),
            lost_seen: 0,
        })
    }

    /// Gives every listed thread a timer, and deletes those of threads
    /// that are gone.
    fn sync_threads(&mut self) {
        let roots = crate::record::threads::roots();
        self.timers.retain(|t| {
            let alive = roots
                .get(t.root)
                .is_some_and(|e| e.tid.load(Ordering::Acquire) == t.tid);
            if !alive {
                delete(t);
            }
            alive
        });
        for i in 0..roots.len() {
            let Some(e) = roots.get(i) else { continue };
            let tid = e.tid.load(Ordering::Acquire);
            if tid == 0 || self.timers.iter().any(|t| t.root == i && t.tid == tid) {
                continue;
            }
            let Some(buf) = new_buf() else { return };
            buf.active
                .store(e.active.load(Ordering::Acquire), Ordering::Relaxed);
            buf.stack_hi
                .store(e.stack_hi.load(Ordering::Acquire), Ordering::Relaxed);
            // No producer: the buffer has no owner (`tid` is 0).
            buf.ring.clear();
            buf.tid.store(tid, Ordering::Release);
            match create(tid, buf, self.period_ns) {
                Some(id) => self.timers.push(Timer {
                    root: i,
                    tid,
                    id,
                    buf,
                }),
                None => release(buf),
            }
        }
    }

    pub(crate) fn stop(self) -> Vec<&'static ThreadBuf> {
        let bufs = self.timers.iter().map(|t| t.buf).collect();
        for t in &self.timers {
            delete(t);
        }
        SESSION.store(false, Ordering::Release);
        bufs
    }
}

/// Deletes a thread's timer; its buffer stays owned until drained.
fn delete(t: &Timer) {
    // SAFETY: `t.id` came from a successful `timer_create` and is deleted
    // once (timers leave the session's list when deleted).
    unsafe { libc::timer_delete(t.id.0) };
    t.buf.tid.store(0, Ordering::Release);
}

fn release(buf: &'static ThreadBuf) {
    buf.tid.store(0, Ordering::Release);
    FREE.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(buf);
}

/// The CPU-time clock of thread `tid` (Linux's encoding of a per-thread
/// clock: `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
fn thread_clock(tid: u32) -> libc::clockid_t {
    ((!(tid as libc::clockid_t)) << 3) | 6
}

fn create(tid: u32, buf: &'static ThreadBuf, period_ns: u64) -> Option<TimerId> {
    // SAFETY: a zeroed `sigevent` is a valid value (all integers and a
    // pointer union); the fields set below are the ones `SIGEV_THREAD_ID`
    // reads.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = libc::SIGPROF;
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

/// Installs the `SIGPROF` handler, once per process. It stays installed
/// after a session ends: a signal from a timer deleted a moment earlier
/// may still be pending, and must not meet the default action (which
/// ends the process). Refused if another handler holds `SIGPROF`.
fn install() -> io::Result<()> {
    if INSTALLED.load(Ordering::Acquire) {
        return Ok(());
    }
    // SAFETY: `sigaction` with valid pointers; the handler has the
    // `SA_SIGINFO` signature.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "SIGPROF already has a handler (another profiler?); on-CPU sampling needs it",
            ));
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    INSTALLED.store(true, Ordering::Release);
    Ok(())
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
    if buf.tid.load(Ordering::Acquire) != me {
        return;
    }
    if buf.busy.swap(true, Ordering::Acquire) {
        buf.lost.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: this handler is the only producer (`busy`); `capture`
    // fills the whole sample. `ctx` is the interrupted context; `buf.active`
    // is the state of this thread (its `tid` is ours), alive while it runs.
    let pushed = unsafe {
        buf.ring.push_with(|slot| {
            capture(slot, ctx, buf);
            (*slot).handler_ns = monotonic_ns().saturating_sub(t0);
        })
    };
    if !pushed {
        buf.lost.fetch_add(1, Ordering::Relaxed);
    }
    buf.busy.store(false, Ordering::Release);
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
/// As for [`handle`]'s slot write: `s` is owned by the caller, `buf`'s
/// thread is the calling one.
unsafe fn capture(s: *mut Sample, ctx: *const libc::ucontext_t, buf: &ThreadBuf) {
    // SAFETY: the caller's contract for every access below; see each.
    unsafe {
        // The slot may never have held a sample: make it a valid one
        // (all zeros: integers, arrays of them and `false`s) before taking
        // a reference to it.
        std::ptr::write_bytes(s, 0, 1);
        let s = &mut *s;
        // Native frames: the interrupted address, then frame pointers,
        // followed only while each frame lies above the last, inside the
        // stack (between the interrupted stack pointer and the top).
        let (pc, mut fp, sp) = registers(ctx);
        s.native[0] = pc;
        let mut n = 1;
        let hi = buf.stack_hi.load(Ordering::Relaxed);
        while n < MAX_NATIVE && fp >= sp && fp % 8 == 0 && fp.saturating_add(16) <= hi {
            // In the stack, aligned: mapped memory.
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
        s.n_native = n as u32;
        // The async chain and the published stack.
        s.n_live = 0;
        s.live_cut = false;
        s.record = 0;
        s.task_id = 0;
        s.running = 0;
        s.copied = false;
        let a = &*buf.active.load(Ordering::Relaxed);
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
        let record = a.record.load(Ordering::Relaxed);
        if let Some(r) = record.as_ref() {
            s.record = record.addr();
            s.task_id = r.id.load(Ordering::Relaxed);
            s.copied = r.copy_in_signal(&mut s.copy).is_ok();
        }
    }
}

impl Session {
    fn bufs(&self) -> impl Iterator<Item = &'static ThreadBuf> + '_ {
        self.timers.iter().map(|t| t.buf)
    }
}

impl Sampling {
    /// Gives new threads a timer, then takes in every captured sample.
    pub(crate) fn drain_on_cpu(&mut self) {
        let Some(mut session) = self.on_cpu.take() else {
            return;
        };
        session.sync_threads();
        let bufs: Vec<_> = session.bufs().collect();
        let period = session.period_ns;
        let lost: u64 = bufs.iter().map(|b| b.lost.load(Ordering::Relaxed)).sum();
        self.drain(&bufs, period);
        // `lost` counts grow per buffer for the process's life.
        self.profile.stats.signals_lost += lost.saturating_sub(session.lost_seen);
        session.lost_seen = lost;
        self.on_cpu = Some(session);
    }

    /// After the timers were deleted: what is left in the buffers.
    pub(crate) fn drain_stopped(&mut self, session: Session) {
        let period = session.period_ns;
        let seen = session.lost_seen;
        let bufs = session.stop();
        let lost: u64 = bufs.iter().map(|b| b.lost.load(Ordering::Relaxed)).sum();
        self.drain(&bufs, period);
        self.profile.stats.signals_lost += lost.saturating_sub(seen);
        for b in bufs {
            release(b);
        }
    }

    fn drain(&mut self, bufs: &[&'static ThreadBuf], period_ns: u64) {
        for b in bufs {
            while let Some(s) = b.ring.pop() {
                self.on_cpu_sample(&s, period_ns);
            }
        }
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
        // SAFETY: records are never freed; `read` validates the task id.
        let r: &TaskRecord = unsafe { &*std::ptr::with_exposed_provenance::<TaskRecord>(s.record) };
        let now = crate::record::clock::system_ms();
        let mut copy = StackCopy::default();
        let read = crate::task::registry::index_of(s.record, &mut self.record_page)
            .and_then(|index| r.read(index, &mut copy, now));
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
