//! The wall-clock tick: the sampler thread's state ([`Sampling`]), and
//! what one tick does: every running task and a reservoir of the others
//! read ([`Sampling::tick`]), each copy checked, and its samples
//! aggregated through the caches ([`super::cache`]) into the profile.
//! The roots of one tokio task are one task of the tick
//! ([`super::tokio_tasks`]). The on-CPU drain runs after each tick
//! ([`Sampling::step`]).

use std::time::Duration;

use super::cache::{Shape, SiteFrames, TaskCache};
use super::labels::Sources;
use super::profile::{Profile, SampleState, Weights};
use super::tokio_tasks::{Root, TokioTasks, Unit};
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
    /// The sampler thread's CPU time at the end of the last tick.
    last_cpu: u64,
    pub(crate) copy: StackCopy,
    /// The tick's running tasks and reservoir.
    pick: Pick,
    /// The tick's tokio tasks (see [`super::tokio_tasks`]).
    pub(crate) tokio_tasks: TokioTasks,
    /// Scratch: a sample's shape, and the on-CPU paths of a tokio task's
    /// roots.
    shape: Shape,
    running_shape: Shape,
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
            last_cpu: 0,
            copy: StackCopy::default(),
            pick: Pick {
                running: Vec::new(),
                reservoir: Vec::new(),
                max: max_tasks,
                others: 0,
                rng: seed | 1,
            },
            tokio_tasks: TokioTasks::default(),
            shape: Shape::default(),
            running_shape: Shape::default(),
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
            on_cpu.drain(&mut self.profile, &self.tokio_tasks);
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
            on_cpu.stop(&mut self.profile, &self.tokio_tasks);
        }
        self.profile
    }

    /// One wall-clock tick: every running task, and a reservoir of the
    /// others (a tokio task's roots count as one task, running if one
    /// is).
    pub(crate) fn tick(&mut self) {
        self.profile.stats.ticks += 1;
        let now_ms = crate::clock::system_ms();
        self.pick.begin();
        self.tokio_tasks.begin();
        let (pick, tasks, tokio_tasks) = (&mut self.pick, &self.tasks, &mut self.tokio_tasks);
        registry::for_each_record(|index, record| {
            let Some((id, state, _)) = record.peek(now_ms) else {
                return;
            };
            // Spawned and not polled yet: no stack to sample.
            if state == TaskState::Scheduled && record.not_started() {
                return;
            }
            let running = state == TaskState::Running;
            match tasks.tokio_of(index, id, record) {
                Some(tokio) => tokio_tasks.file(tokio, Root { index, id, record }, running),
                None => pick.offer(Unit::Task(index, record), running),
            }
        });
        tokio_tasks.finish(|unit, running| pick.offer(unit, running));
        let others = self.pick.others;
        let kept = self.pick.reservoir.len() as u64;
        self.profile.stats.reservoir_skipped += others - kept;
        // Each kept task stands for `others / kept` tasks: whole samples,
        // with the remainder spread one each over the first ones, so the
        // tick's total is exactly one sample per live task.
        let (per, extra) = match others.checked_div(kept) {
            Some(per) => (per, others % kept),
            None => (1, 0),
        };
        let running = std::mem::take(&mut self.pick.running);
        for &unit in &running {
            self.sample_unit(unit, now_ms, 1);
        }
        self.pick.running = running;
        let reservoir = std::mem::take(&mut self.pick.reservoir);
        for (i, &unit) in reservoir.iter().enumerate() {
            if let Some(&ahead) = reservoir.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            self.sample_unit(unit, now_ms, per + u64::from((i as u64) < extra));
        }
        self.pick.reservoir = reservoir;
    }

    /// Asks the processor for what sampling `unit` reads first: its
    /// record(s) and their cache lines.
    #[inline]
    fn prefetch(&self, unit: Unit) {
        match unit {
            Unit::Task(index, record) => {
                record.prefetch();
                self.tasks.prefetch(index);
            }
            Unit::Tokio(k) => {
                let roots = self.tokio_tasks.roots(self.tokio_tasks.several(k));
                for root in roots.iter().take(PREFETCH_ROOTS) {
                    root.record.prefetch();
                    self.tasks.prefetch(root.index);
                }
                self.tasks.prefetch_tokio(roots[0].index);
            }
        }
    }

    /// Samples `unit`, standing for `times` tasks.
    #[inline]
    fn sample_unit(&mut self, unit: Unit, now_ms: u64, times: u64) {
        match unit {
            Unit::Task(index, record) => self.sample(index, record, now_ms, times),
            Unit::Tokio(k) => self.sample_tokio(k, now_ms, times),
        }
    }

    /// Reads the roots of the tick's tokio task `k` (see
    /// [`super::tokio_tasks`]) and adds its sample(s), standing for
    /// `times` tasks: one sample, whose stacks are those of its running
    /// root(s) if any runs, else those of every root, in order. A root
    /// that ended since the scan is left out; if any other cannot be
    /// copied (torn) or is inconsistent, the whole sample is dropped and
    /// counted as for one task.
    fn sample_tokio(&mut self, k: u32, now_ms: u64, times: u64) {
        let several = self.tokio_tasks.several(k);
        self.shape.start(SampleState::OffCpu);
        self.running_shape.start(SampleState::OnCpu);
        let mut sources = Sources::default();
        let (mut read, mut retried, mut truncated) = (false, 0, false);
        let (mut torn, mut inconsistent) = (false, false);
        let mut first = 0;
        for j in 0..several.len() {
            let root = self.tokio_tasks.roots(several)[j];
            let tasks = &self.tasks;
            let raw = root.record.read_tries_with(
                root.index,
                &mut self.copy,
                now_ms,
                TICK_COPY_ATTEMPTS,
                |id, _| tasks.wants_ext(root.index, id),
            );
            // Not the task the scan found: it ended since.
            let Some(raw) = raw.filter(|raw| raw.id == root.id) else {
                continue;
            };
            read = true;
            retried += u64::from(raw.torn);
            torn = !raw.stack_copied;
            inconsistent = self.copy.frames.is_empty();
            if torn || inconsistent {
                break;
            }
            truncated |= self.copy.hidden > 0;
            self.tasks.observe(root.index, &raw);
            if sources.first.is_none() {
                first = root.index;
            }
            let (name, location) = self.tasks.sources(root.index);
            sources.add(raw.id, raw.root_site, name, location);
            if raw.state == TaskState::Running {
                self.running_shape.push_sample(&self.copy, raw.state);
            } else {
                self.shape.push_sample(&self.copy, raw.state);
            }
        }
        if !read {
            // Every root ended between the scan and the read.
            return;
        }
        let stats = &mut self.profile.stats;
        stats.attempted += 1;
        stats.retried += retried;
        if torn {
            stats.dropped_torn += 1;
            return;
        }
        if inconsistent {
            stats.dropped_inconsistent += 1;
            return;
        }
        stats.ok += 1;
        stats.truncated += u64::from(truncated);
        let shape = if self.running_shape.len() > 0 {
            &self.running_shape
        } else {
            &self.shape
        };
        let weights = weights(self.interval, shape.len(), times);
        self.tasks.add_tokio(
            (first, several.tokio_id),
            &sources,
            &mut self.profile,
            &mut self.site_frames,
            shape,
            weights,
        );
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
        // Registered at its spawn and not polled yet, so without a stack:
        // the scan leaves such tasks out, and this one took the record
        // after the scan (the task the scan found has ended).
        if raw.stack_copied && raw.polls == 0 && self.copy.frames.is_empty() {
            return;
        }
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
        tasks.observe(index, raw);
        let shape = &mut self.shape;
        shape.start(match raw.state {
            TaskState::Running => SampleState::OnCpu,
            _ => SampleState::OffCpu,
        });
        shape.push_sample(&self.copy, raw.state);
        let weights = weights(self.interval, shape.len(), times);
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
            weights,
        );
    }
}

/// The units a tick samples: every running one, and a uniform random
/// subset of at most `max` of the others (reservoir sampling).
struct Pick {
    running: Vec<Unit>,
    reservoir: Vec<Unit>,
    max: usize,
    /// The units not running offered this tick.
    others: u64,
    rng: u64,
}

impl Pick {
    fn begin(&mut self) {
        self.running.clear();
        self.reservoir.clear();
        self.others = 0;
    }

    /// Takes in `unit`, found running or not.
    #[inline]
    fn offer(&mut self, unit: Unit, running: bool) {
        if running {
            self.running.push(unit);
            return;
        }
        self.others += 1;
        if self.reservoir.len() < self.max {
            self.reservoir.push(unit);
        } else {
            // Algorithm R: keep the n-th with probability k/n.
            let j = next_random(&mut self.rng) % self.others;
            if (j as usize) < self.max {
                self.reservoir[j as usize] = unit;
            }
        }
    }
}

/// How many tasks ahead of the one it reads a tick prefetches the record
/// of (the reservoir's records were scanned a while ago, and are mostly
/// out of cache again with many tasks).
const PREFETCH_AHEAD: usize = 4;

/// The weights of the `j`-th of `n` stacks of a sample standing for
/// `times` tasks, at ticks `interval` apart: each one sample per task, the
/// tick's wall time shared among the stacks, the remainder to the first,
/// so that the task's total is exact (one stack, the usual case, without
/// dividing).
#[inline]
fn weights(interval: Duration, n: usize, times: u64) -> impl Fn(usize) -> Weights {
    let wall = interval.as_nanos() as u64 * times;
    let n = n as u64;
    move |j: usize| Weights {
        samples: times,
        wall_ns: match (n, j) {
            (1, _) => wall,
            (_, 0) => wall / n + wall % n,
            _ => wall / n,
        },
        cpu_ns: 0,
    }
}

/// How many roots of a tokio task a tick prefetches the records of.
const PREFETCH_ROOTS: usize = 4;

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
