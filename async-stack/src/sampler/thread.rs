//! The sampler thread and its handle: starting it (with the on-CPU
//! session, when asked), its loop of ticks, and stopping it. What each
//! tick does is [`super::wall`]'s.

use std::io;
// The stop flag and counters the sampler thread shares with its handle:
// plain `std` threads, which loom does not model.
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::profile::Profile;
use super::wall::Sampling;
use super::{__faults, SamplerBuilder, Stats};
#[cfg(all(target_os = "linux", not(async_stack_loom)))]
use crate::sampler::oncpu::OnCpu;
use crate::shim::lock_std;

/// What the sampler thread shares with its handle.
#[derive(Debug, Default)]
struct Shared {
    stop: Mutex<bool>,
    wake: Condvar,
    stats: Mutex<Stats>,
}

/// A running sampler thread.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) interval: Duration,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<Profile>>,
}

pub(crate) fn start(b: SamplerBuilder) -> io::Result<Running> {
    let interval = Duration::from_nanos(1_000_000_000 / u64::from(b.frequency_hz));
    let mut profile = match b.resume {
        Some(mut p) => {
            if p.budget != b.budget {
                p.budget = b.budget;
                if p.memory_bytes() > p.budget {
                    p.shed();
                }
            }
            p
        }
        None => Profile::new(b.budget),
    };
    profile.frequency_hz = b.frequency_hz;
    profile.grouping = b.grouping;
    if profile.start_unix_ns == 0 {
        profile.start_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    }
    let shared = Arc::new(Shared::default());
    *lock_std(&shared.stats) = profile.stats;
    #[cfg(all(target_os = "linux", not(async_stack_loom)))]
    let on_cpu = if b.on_cpu {
        Some(OnCpu::start(b.frequency_hz)?)
    } else {
        None
    };
    #[cfg_attr(
        not(all(target_os = "linux", not(async_stack_loom))),
        allow(unused_mut)
    )]
    let mut state = Sampling::new(profile, interval, b.max_tasks_per_tick, b.seed);
    #[cfg(all(target_os = "linux", not(async_stack_loom)))]
    {
        state.on_cpu = on_cpu;
    }
    let thread_shared = shared.clone();
    let fault = b.fault;
    if fault == Some(__faults::Fault::SpawnFails) {
        return Err(io::Error::other("sampler thread: injected spawn failure"));
    }
    let thread = std::thread::Builder::new()
        .name("async-stack-sampler".into())
        .spawn(move || {
            run(&mut state, &thread_shared);
            if fault == Some(__faults::Fault::PanicsOnStop) {
                panic!("sampler thread: injected panic");
            }
            state.finish()
        })?;
    Ok(Running {
        interval,
        shared,
        thread: Some(thread),
    })
}

impl Running {
    pub(crate) fn stats(&self) -> Stats {
        *lock_std(&self.shared.stats)
    }

    pub(crate) fn stop(mut self) -> Profile {
        self.signal_stop();
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(p)) => p,
            // The sampler thread panicked: a bug; its profile is lost.
            Some(Err(e)) => std::panic::resume_unwind(e),
            None => Profile::default(),
        }
    }

    fn signal_stop(&self) {
        *lock_std(&self.shared.stop) = true;
        self.shared.wake.notify_all();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.signal_stop();
            let _ = t.join();
        }
    }
}

/// The sampler thread's loop: a tick every `interval` until asked to
/// stop (a tick that comes late moves the next ones with it).
fn run(state: &mut Sampling, shared: &Shared) {
    let started = Instant::now();
    state.begin();
    let mut next = started;
    loop {
        {
            let mut stop = lock_std(&shared.stop);
            loop {
                if *stop {
                    state.profile.duration_ns = state
                        .profile
                        .duration_ns
                        .saturating_add(started.elapsed().as_nanos() as u64);
                    return;
                }
                let now = Instant::now();
                if now >= next {
                    break;
                }
                stop = shared
                    .wake
                    .wait_timeout(stop, next - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        let now = Instant::now();
        if now > next + state.interval {
            state.profile.stats.late_ticks += 1;
            next = now;
        }
        next += state.interval;
        state.step();
        *lock_std(&shared.stats) = state.profile.stats;
    }
}
