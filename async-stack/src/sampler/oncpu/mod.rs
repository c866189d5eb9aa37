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
//!   blocks it), and installs [`on_signal`](handler::on_signal) for it; the
//!   handler stays installed for the process's life (a signal from a timer
//!   deleted a moment earlier may still be pending, and a real-time
//!   signal's default action ends the process). Every session start checks
//!   that the handler is still ours: it reinstalls it over a default or
//!   ignored disposition, and picks another free signal if another
//!   handler took it. Every tenth of a second the sampler thread checks
//!   again (and reinstalls it over a default or ignored disposition).
//! - **Buffers** ([`buffers`]). Each sampled thread has a
//!   [`ThreadBuf`](buffers::ThreadBuf): a ring of [`RING`](buffers::RING)
//!   samples with one producer (the handler, on that thread) and
//!   one consumer (the sampler thread). Buffers are allocated once and
//!   never freed (a signal may still be pending when a timer is deleted),
//!   listed in the static `BUFS` so that the handler can check a pointer
//!   it is given ([`is_buf`](buffers::is_buf)), and reused through a free
//!   list: the number allocated is the most threads sampled at once,
//!   whatever the number of threads that came and went.
//! - **Ownership.** A buffer's ring is an [`OwnedRing`](crate::sampler::ring::OwnedRing), lent to the
//!   thread id of the thread it samples (see [`crate::sampler::ring`]): the
//!   handler pushes only into a ring its own thread owns, while holding
//!   it, and the sampler thread writes the buffer's other fields (the
//!   owner's [`Active`](crate::record::current::Active) and stack bounds) only while it holds the ring
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
//!   pointer holds; the thread's [`Active`](crate::record::current::Active) state and the frames reachable
//!   from its current-frame word, which the thread keeps whole for its
//!   own signal handlers (see [`crate::record::current`]); and the
//!   published stack of the task being polled, which only this thread
//!   writes ([`TaskRecord::copy_in_signal`](crate::task::record::TaskRecord::copy_in_signal)).
//! - **Signals that stop arriving.** A thread can block the signal, or
//!   another handler can take it. Every tenth of a second the sampler
//!   thread reads each sampled thread's CPU time
//!   ([`Session::count_silent`](timers::Session::count_silent)): a thread
//!   that ran `SILENT_PERIODS` periods (and at least `SILENT_NS`, both in
//!   [`timers`]) of CPU time since its handler last took a signal has
//!   stopped getting them, and each period it ran since is counted in
//!   `signals_lost`.
//!
//! The handler allocates nothing, takes no lock, and calls only
//! `gettid` and `clock_gettime`, both async-signal-safe.

mod buffers;
mod handler;
mod intake;
mod signal;
mod timers;

use std::io;
// A test hook on a platform loom does not model (on-CPU sampling is off
// under loom).
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sampler::profile::Profile;
use crate::sampler::tokio_tasks::TokioTasks;
pub(crate) use buffers::buffers_allocated;
use buffers::own_buf;
use intake::Intake;
use timers::Session;

/// The on-CPU side of a sampler run: the session's timers and buffers,
/// and the intake their samples go through. Dropping it without
/// [`stop`](Self::stop) (the sampler thread panicked) ends the session
/// without a profile.
pub(crate) struct OnCpu {
    session: Session,
    intake: Intake,
}

impl OnCpu {
    /// Claims the process's session (see [`Session`]).
    pub(crate) fn start(hz: u32) -> io::Result<OnCpu> {
        Ok(OnCpu {
            session: Session::start(hz)?,
            intake: Intake::new(),
        })
    }

    /// Gives new threads a timer, takes every captured sample into
    /// `profile`, and retires the buffers of threads that are gone;
    /// nothing while [`hold_drain`] holds it.
    /// `tokio` is the last tick's tokio tasks, whose roots a sample is
    /// labelled as one task with.
    pub(crate) fn drain(&mut self, profile: &mut Profile, tokio: &TokioTasks) {
        if HOLD.load(Ordering::Relaxed) {
            return;
        }
        self.session.drain(profile, &mut self.intake, tokio);
    }

    /// Ends the session, taking what is left in the buffers into
    /// `profile`.
    pub(crate) fn stop(mut self, profile: &mut Profile, tokio: &TokioTasks) {
        self.session.stop(profile, &mut self.intake, tokio);
    }
}

/// Set by [`hold_drain`] (tests only).
static HOLD: AtomicBool = AtomicBool::new(false);

/// See [`crate::sampler::__faults::hold_on_cpu_drain`].
pub(crate) fn hold_drain(hold: bool) {
    HOLD.store(hold, Ordering::Relaxed);
}

/// See [`crate::sampler::__faults::on_cpu_sampled`].
pub(crate) fn sampled() -> bool {
    own_buf().is_some()
}

/// See [`crate::sampler::__faults::on_cpu_backlog`].
pub(crate) fn backlog() -> (usize, u64) {
    own_buf().map_or((0, 0), |b| b.ring.backlog())
}
