//! The wall-clock tick: the sampler thread's state ([`Sampling`]), and
//! what one tick does: every running task and a reservoir of the others
//! read ([`Sampling::tick`]), each copy checked, and its samples
//! aggregated through the caches ([`super::cache`]) into the profile.
//! The on-CPU drain runs after each tick ([`Sampling::step`]).

use std::time::Duration;

use super::cache::{Shape, SiteFrames, TaskCache};
use super::profile::{Profile, SampleState, Weights};
#[cfg(all(target_os = "linux", not(async_stack_loom)))]
use crate::sampler::oncpu::OnCpu;
use crate::task::TaskState;
use crate::task::record::{RawTask, TaskRecord};
use crate::task::registry;
use crate::task::stack::StackCopy;

/// Copy attempts of one task's published stack in one tick before the
/// sample is dropped as torn ([`Stats::dropped_torn`](super::Stats::dropped_torn)).
/// (Not [`crate::task::record`]'s bound on one read's attempts.)
const TICK_COPY_ATTEMPTS: u32 = 64;

/// The sampler thread's state.
pub(crate) struct Sampling {
    pub(crate) profile: Profile,
    pub(crate) interval: Duration,
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
    /// The on-CPU session, when sampling on-CPU.
    #[cfg(all(target_os = "linux", not(async_stack_loom)))]
    pub(crate) on_cpu: Option<OnCpu>,
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
        }
    }

    /// Starts the count of the sampler thread's CPU time.
    pub(crate) fn begin(&mut self) {
        self.last_cpu = thread_cpu_ns();
    }

    /// One step of the sampler thread: a wall-clock tick, then the drain
    /// of the on-CPU samples, and the step's CPU time counted.
    pub(crate) fn step(&mut self) {
        self.tick();
        #[cfg(all(target_os = "linux", not(async_stack_loom)))]
        if let Some(on_cpu) = &mut self.on_cpu {
            on_cpu.drain(&mut self.profile);
        }
        let cpu = thread_cpu_ns();
        self.profile.stats.sampler_cpu_ns = self
            .profile
            .stats
            .sampler_cpu_ns
            .saturating_add(cpu.saturating_sub(self.last_cpu));
        self.last_cpu = cpu;
    }

    /// The profile, once the on-CPU session (if any) has been drained and
    /// ended.
    #[cfg_attr(
        not(all(target_os = "linux", not(async_stack_loom))),
        allow(unused_mut)
    )]
    pub(crate) fn finish(mut self) -> Profile {
        #[cfg(all(target_os = "linux", not(async_stack_loom)))]
        if let Some(on_cpu) = self.on_cpu.take() {
            on_cpu.stop(&mut self.profile);
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
        let read = r.read_tries_with(
            index,
            &mut self.copy,
            now_ms,
            TICK_COPY_ATTEMPTS,
            |id, _| tasks.wants_ext(index, id),
        );
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

#[cfg(all(test, not(async_stack_loom)))]
mod tests;
