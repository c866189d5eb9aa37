//! The sampler thread: wall-clock ticks over every task, and the drain of
//! on-CPU samples (see the module docs of [`crate::sampler`]).

use std::borrow::Cow;
use std::io;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::cache::{Shape, SiteFrames, TaskCache};
use super::profile::RawFrame;
use super::{Grouping, Profile, SampleState, SamplerBuilder, Stats, Weights};
use crate::record::site::SiteId;
use crate::record::site::{CallSite, await_site_by_id, call_site_by_id};
use crate::task::TaskState;
use crate::task::record::{RawTask, TaskName, TaskRecord};
use crate::task::registry;
use crate::task::stack::StackCopy;

/// Copy attempts per task and tick before a sample is dropped as torn.
const COPY_TRIES: u32 = 64;

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
    *shared.stats.lock().unwrap_or_else(PoisonError::into_inner) = profile.stats;
    #[cfg(all(target_os = "linux", not(async_stack_loom)))]
    let on_cpu = if b.on_cpu {
        Some(super::oncpu::Session::start(b.frequency_hz)?)
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
    if fault == Some(super::__faults::Fault::SpawnFails) {
        return Err(io::Error::other("sampler thread: injected spawn failure"));
    }
    let thread = std::thread::Builder::new()
        .name("async-stack-sampler".into())
        .spawn(move || {
            state.run(&thread_shared);
            if fault == Some(super::__faults::Fault::PanicsOnStop) {
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
        *self
            .shared
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
        *self
            .shared
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
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

/// The sampler thread's state.
pub(crate) struct Sampling {
    pub(crate) profile: Profile,
    interval: Duration,
    max_tasks: usize,
    rng: u64,
    /// The sampler thread's CPU time at the end of the last tick.
    last_cpu: u64,
    pub(crate) copy: StackCopy,
    /// Scratch: the tick's running tasks and reservoir, with their record
    /// indices.
    running: Vec<(u32, &'static TaskRecord)>,
    reservoir: Vec<(u32, &'static TaskRecord)>,
    /// Scratch: a stack's frame ids, and a sample's shape.
    frame_ids: Vec<u32>,
    shape: Shape,
    /// Profile ids remembered between samples (see [`super::cache`]).
    pub(crate) site_frames: SiteFrames,
    pub(crate) tasks: TaskCache,
    #[cfg(all(target_os = "linux", not(async_stack_loom)))]
    pub(crate) on_cpu: Option<super::oncpu::Session>,
    /// The record page an on-CPU sample's record was last found in (see
    /// [`crate::task::registry::index_of`]).
    #[cfg(all(target_os = "linux", not(async_stack_loom)))]
    pub(crate) record_page: usize,
    /// Where native addresses live, for on-CPU samples.
    pub(crate) modules: super::native::Modules,
}

impl Sampling {
    /// The state of a sampler thread that aggregates into `profile`,
    /// ticking every `interval` (the on-CPU session is added by `start`).
    pub(crate) fn new(profile: Profile, interval: Duration, max_tasks: usize, seed: u64) -> Self {
        let slots = TaskCache::slots_for_budget(profile.budget());
        Sampling {
            profile,
            interval,
            max_tasks,
            rng: seed | 1,
            last_cpu: 0,
            copy: StackCopy::default(),
            running: Vec::new(),
            reservoir: Vec::new(),
            frame_ids: Vec::new(),
            shape: Shape::default(),
            site_frames: SiteFrames::default(),
            tasks: TaskCache::new(slots),
            #[cfg(all(target_os = "linux", not(async_stack_loom)))]
            on_cpu: None,
            #[cfg(all(target_os = "linux", not(async_stack_loom)))]
            record_page: 0,
            modules: super::native::Modules::new(),
        }
    }

    fn run(&mut self, shared: &Shared) {
        let started = Instant::now();
        self.last_cpu = thread_cpu_ns();
        let mut next = started;
        loop {
            {
                let mut stop = shared.stop.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if *stop {
                        self.profile.duration_ns = self
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
            if now > next + self.interval {
                self.profile.stats.late_ticks += 1;
                next = now;
            }
            next += self.interval;
            self.tick();
            #[cfg(all(target_os = "linux", not(async_stack_loom)))]
            self.drain_on_cpu();
            let cpu = thread_cpu_ns();
            self.profile.stats.sampler_cpu_ns = self
                .profile
                .stats
                .sampler_cpu_ns
                .saturating_add(cpu.saturating_sub(self.last_cpu));
            self.last_cpu = cpu;
            *shared.stats.lock().unwrap_or_else(PoisonError::into_inner) = self.profile.stats;
        }
    }

    fn finish(mut self) -> Profile {
        #[cfg(all(target_os = "linux", not(async_stack_loom)))]
        if let Some(s) = self.on_cpu.take() {
            self.drain_stopped(s);
        }
        self.profile
    }

    /// One wall-clock tick: every running task, and a reservoir of the
    /// others.
    pub(crate) fn tick(&mut self) {
        self.profile.stats.ticks += 1;
        let now_ms = crate::clock::system_ms();
        self.running.clear();
        self.reservoir.clear();
        let k = self.max_tasks;
        let mut others = 0u64;
        let mut rng = self.rng;
        let (running, reservoir) = (&mut self.running, &mut self.reservoir);
        registry::for_each_record(|index, r| {
            let Some((_, state, _)) = r.peek(now_ms) else {
                return;
            };
            if state == TaskState::Running {
                running.push((index, r));
                return;
            }
            others += 1;
            if reservoir.len() < k {
                reservoir.push((index, r));
            } else {
                // Algorithm R: keep the n-th with probability k/n.
                let j = next_random(&mut rng) % others;
                if (j as usize) < k {
                    reservoir[j as usize] = (index, r);
                }
            }
        });
        self.rng = rng;
        let kept = self.reservoir.len() as u64;
        self.profile.stats.reservoir_skipped += others - kept;
        // Each kept task stands for `others / kept` tasks: whole samples,
        // with the remainder spread one each over the first ones, so the
        // tick's total is exactly one sample per live task.
        let (per, extra) = match others.checked_div(kept) {
            Some(per) => (per, others % kept),
            None => (1, 0),
        };
        let running = std::mem::take(&mut self.running);
        for &(index, r) in &running {
            self.sample(index, r, now_ms, 1);
        }
        self.running = running;
        let reservoir = std::mem::take(&mut self.reservoir);
        for (i, &(index, r)) in reservoir.iter().enumerate() {
            if let Some(&(ahead, record)) = reservoir.get(i + PREFETCH_AHEAD) {
                record.prefetch();
                self.tasks.prefetch(ahead);
            }
            self.sample(index, r, now_ms, per + u64::from((i as u64) < extra));
        }
        self.reservoir = reservoir;
    }

    /// Reads one task (record `index`) and adds its sample(s), standing
    /// for `times` tasks.
    ///
    /// The steady path: a task whose stacks are those of its last sample
    /// adds its weights to the entries that sample hit (see
    /// [`super::cache`]), and loads neither its name nor its spawn site.
    fn sample(&mut self, index: u32, r: &TaskRecord, now_ms: u64, times: u64) {
        let tasks = &self.tasks;
        let read = r.read_tries_with(index, &mut self.copy, now_ms, COPY_TRIES, |id, _| {
            tasks.wants_ext(index, id)
        });
        let Some(raw) = read else {
            // The task ended between the scan and the read.
            return;
        };
        let stats = &mut self.profile.stats;
        stats.attempted += 1;
        stats.retried += u64::from(raw.torn);
        if !raw.stack_copied {
            stats.dropped_torn += 1;
            return;
        }
        let frames = &self.copy.frames;
        if frames.is_empty() {
            stats.dropped_inconsistent += 1;
            return;
        }
        stats.ok += 1;
        if self.copy.hidden > 0 {
            stats.truncated += 1;
        }
        self.aggregate(index, &raw, times);
    }

    /// Adds the sample(s) of `raw`, read from record `index` with its
    /// stack in `self.copy` (not empty), standing for `times` tasks.
    #[inline]
    pub(crate) fn aggregate(&mut self, index: u32, raw: &RawTask, times: u64) {
        let tasks = &mut self.tasks;
        let frames = &self.copy.frames;
        tasks.observe(index, raw);
        let wall = self.interval.as_nanos() as u64 * times;
        let shape = &mut self.shape;
        if raw.state == TaskState::Running {
            // The path to the polled frame; without one (the polled frame
            // holds no slot, or the platform does not tag the current
            // word), the running path as far as it is known.
            let end = frames
                .iter()
                .position(|f| f.innermost)
                .or_else(|| frames.iter().rposition(|f| f.running))
                .unwrap_or(0);
            shape.start(SampleState::OnCpu);
            shape.push_path(&self.copy, end);
        } else {
            // Suspended: one stack per pending branch (leaf of the tree).
            shape.start(SampleState::OffCpu);
            for i in 0..frames.len() {
                let next_depth = frames.get(i + 1).map(|f| f.depth);
                if next_depth.is_none_or(|d| d <= frames[i].depth) {
                    shape.push_path(&self.copy, i);
                }
            }
        }
        // The wall time is shared among the branches, the remainder to the
        // first, so the task's total is exact (one branch, the usual case,
        // without dividing).
        let n = shape.len() as u64;
        let weights = |j: usize| Weights {
            samples: times,
            wall_ns: match (n, j) {
                (1, _) => wall,
                (_, 0) => wall / n + wall % n,
                _ => wall / n,
            },
            cpu_ns: 0,
        };
        if let Some(entries) = tasks.entries_for(index, shape, self.profile.epoch()) {
            for (j, &entry) in entries.iter().enumerate() {
                self.profile.add_to_entry(entry, weights(j));
            }
            return;
        }
        tasks.add(
            index,
            &mut self.profile,
            &mut self.site_frames,
            shape,
            &mut self.frame_ids,
            weights,
        );
    }
}

/// How many tasks ahead of the one it reads a tick prefetches the record
/// of (the reservoir's records were scanned a while ago, and are mostly
/// out of cache again with many tasks).
const PREFETCH_AHEAD: usize = 4;

/// This thread's CPU time, in nanoseconds (`0` where unknown).
pub(crate) fn thread_cpu_ns() -> u64 {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc != 0 {
            return 0;
        }
        (ts.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64)
    }
    #[cfg(not(unix))]
    {
        0
    }
}

fn next_random(state: &mut u64) -> u64 {
    // xorshift64*: enough for choosing which tasks to sample.
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// An interned site id as a profile frame (`<unknown>` if it names no
/// site).
pub(crate) fn site_frame(site: u32) -> RawFrame<'static> {
    resolve_site(site).unwrap_or(RawFrame::Async {
        function: "<unknown>",
        file: "",
        line: 0,
        column: 0,
    })
}

/// An interned site id as a profile frame, if it names a site.
pub(crate) fn resolve_site(site: u32) -> Option<RawFrame<'static>> {
    if site & SiteId::AWAIT != 0
        && let Some(a) = await_site_by_id(site & !SiteId::AWAIT)
    {
        return Some(RawFrame::Async {
            function: a.call_site().function_static(),
            file: a.file(),
            line: a.line(),
            column: a.column(),
        });
    }
    call_site_by_id(site & !SiteId::AWAIT).map(|c| RawFrame::Async {
        function: c.function_static(),
        file: c.file(),
        line: c.line(),
        column: c.column(),
    })
}

/// The group of a task (see [`Grouping`]) with this name, spawn location
/// and root site, and whether it is the root's (so depends on the root
/// site).
pub(crate) fn group_of<'a>(
    name: Option<&'a TaskName>,
    location: Option<&'static CallSite>,
    root_site: u32,
    grouping: Grouping,
) -> (Cow<'a, str>, bool) {
    let spawn = || location.map(|l| Cow::Owned(format!("{}:{}", l.file(), l.line())));
    let group = match grouping {
        Grouping::TaskName => name.map(|n| Cow::Borrowed(n.as_str())).or_else(spawn),
        Grouping::SpawnSite => spawn(),
    };
    if let Some(group) = group {
        return (group, false);
    }
    let id = root_site & !SiteId::AWAIT;
    let call = if root_site & SiteId::AWAIT != 0 {
        await_site_by_id(id).map(|a| a.call_site())
    } else {
        call_site_by_id(id)
    };
    (
        Cow::Borrowed(call.map_or("<unknown>", CallSite::function_static)),
        true,
    )
}
