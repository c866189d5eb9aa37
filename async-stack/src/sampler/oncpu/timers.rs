//! The on-CPU session: one timer per sampled thread on that thread's
//! CPU-time clock, armed and retired as threads come and go, and the
//! drain of their buffers into the profile (see "Timers" and "Signals
//! that stop arriving" in [`crate::sampler::oncpu`]).

use std::io;
// Process-wide state of a platform loom does not model (on-CPU sampling
// is off under loom).
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::buffers::{ThreadBuf, free_buf, hold_within, take_buf};
use super::intake::Intake;
use super::signal::{claim_signal, keep_handler};
use crate::record::threads::Listed;
use crate::sampler::profile::Profile;
use crate::sampler::tokio_tasks::TokioTasks;

/// Periods of CPU time a thread runs with no signal before its signals
/// count as stopped.
const SILENT_PERIODS: u64 = 8;
/// The least CPU time a thread runs with no signal before its signals
/// count as stopped: well above the kernel's timer resolution (at most
/// 10 ms), which delays CPU-time timers.
const SILENT_NS: u64 = 100_000_000;
/// How long a stopping session waits for a handler to leave a buffer.
const STOP_WAIT: Duration = Duration::from_millis(100);

/// Whether a session is running (one per process): set by
/// [`Session::start`], cleared when the session is dropped, however its
/// sampler thread ends.
static SESSION: AtomicBool = AtomicBool::new(false);
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
pub(super) struct Session {
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
    pub(super) fn start(hz: u32) -> io::Result<Session> {
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
        Ok(session)
    }

    /// Gives new threads a timer, takes in every captured sample, drains
    /// and frees the buffers of threads that are gone, and now and then
    /// counts the signals that stopped arriving.
    pub(super) fn drain(&mut self, profile: &mut Profile, intake: &mut Intake, tokio: &TokioTasks) {
        self.sync_threads();
        let period = self.period_ns;
        for t in self.timers.iter_mut().flatten() {
            t.taken += drain_buf(t.buf, period, profile, (intake, tokio));
        }
        self.retiring.retain(|&b| {
            if !b.ring.try_hold() {
                // Its thread is inside the handler: next tick.
                return true;
            }
            drain_buf(b, period, profile, (intake, tokio));
            free_buf(b, true);
            false
        });
        self.drains += 1;
        if self.drains.is_multiple_of(self.check_every) {
            profile.stats.signals_lost += self.count_silent();
        }
    }

    /// The session ends: deletes its timers, takes in what is left in
    /// the buffers, and gives them back.
    pub(super) fn stop(mut self, profile: &mut Profile, intake: &mut Intake, tokio: &TokioTasks) {
        let period = self.period_ns;
        for b in self.retire_all() {
            let held = hold_within(b, STOP_WAIT);
            // The consumer may drain while a producer runs (see
            // `crate::sampler::ring`); holding `busy` only makes sure none
            // runs after. A buffer not held is emptied by whoever takes it.
            drain_buf(b, period, profile, (intake, tokio));
            free_buf(b, held);
        }
        // Ends the session, now that its buffers are free.
        drop(self);
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

/// Takes in the samples of `b` through `intake`, with the last tick's
/// tokio tasks, and its count of lost ones: the signals the handler took
/// since the last drain.
fn drain_buf(
    b: &ThreadBuf,
    period_ns: u64,
    profile: &mut Profile,
    (intake, tokio): (&mut Intake, &TokioTasks),
) -> u64 {
    let mut taken = 0;
    while let Some(s) = b.ring.pop() {
        intake.take(profile, &s, period_ns, tokio);
        taken += 1;
    }
    let lost = b.ring.take_lost();
    profile.stats.signals_lost += lost;
    taken + lost
}
