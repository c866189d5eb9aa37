//! `sampler`: what the sampling profiler (`async_stack::sampler`) costs.
//!
//! # What runs
//!
//! Four criterion groups, in this order (every wall-clock tick walks every
//! task record handed out so far, and records are reused but never freed,
//! so the groups with fewer tasks run first):
//!
//! 1. `sampler_throughput`: what sampling at 99 Hz takes from an
//!    application. [`SAMPLER_APP_TASKS`] (1,000) long-lived tasks, 500
//!    pairs, run on a `multi_thread` runtime with 2 workers ([`app`]);
//!    each is spawned with `async_stack::tokio::spawn` and runs a 3-deep
//!    `#[traced_async]` chain (`lead` or `follow` -> `rounds` -> `round`).
//!    One iteration asks every pair for [`ROUNDS`] round trips over two
//!    `tokio::sync::mpsc` channels of capacity 1, with [`WORK_STEPS`]
//!    xorshift steps (about a microsecond) on every message, and waits for
//!    every pair's answer (the driver runs in `block_on` on the benchmark
//!    thread). All 1,000 tasks are live from the first iteration to the
//!    last, so every tick reads 1,000 tasks. Timed on the **process's** CPU
//!    time (all threads: the workers, the driver, the sampler thread, the
//!    signal handlers), so the figure is the CPU a fixed amount of work
//!    costs, which on a machine whose cores are busy is the throughput
//!    lost. Variants, in one group: `no sampler` (the baseline),
//!    `wall-clock sampler` (99 Hz), `on-CPU sampler` (`on_cpu(true)`,
//!    99 Hz, which also runs the wall-clock ticks). Each sampler runs for
//!    the whole of its benchmark (warm-up and samples) and is stopped after
//!    it; its counters are printed (`describe`), and so is what its own
//!    clocks (`sampler_cpu_ns`, `handler_ns`) account for per timed
//!    iteration, as a share of the no-sampler iteration ([`Attributed`]): a
//!    steadier estimate of the loss than the difference of two noisy
//!    process-CPU figures, though it leaves out what the sampler costs the
//!    workers (cache misses, the signal's delivery).
//! 2. `sampler_tick`, per [`SAMPLER_TICK_TASKS`] (1,000 and 10,000): the
//!    cost of one wall-clock tick over that many idle tasks, each
//!    suspended at the bottom of a 3-deep `#[traced_async]` chain
//!    ([`idle`]) on a `current_thread` runtime that nobody drives. The
//!    sampler runs at [`SAMPLER_TICK_HZ`] (1000 Hz); one iteration is one
//!    tick, waited for from the benchmark thread (which sleeps). Variants:
//!    - `no sampler`: the same program with no sampler, process CPU time
//!      over one tick interval (the baseline: about zero, the tasks are
//!      idle).
//!    - `sampler tick (process CPU)`: process CPU time per tick, read from
//!      outside the sampler.
//!    - `sampler tick (sampler_cpu_ns)`: the sampler's own account, the
//!      growth of `Stats::sampler_cpu_ns` per tick (the sampler thread's
//!      CPU clock, read after each tick).
//!    - `async_stack::dump()`: one dump of the same tasks, the peer (a dump
//!      also reads every task's published stack once), on the process
//!      clock.
//! 3. `sampler_handler`: the on-CPU signal handler's time per sample. An
//!    on-CPU sampler at 99 Hz runs while the benchmark thread spins inside
//!    8 traced frames ([`benches::time_in_traced_chain`]): CPU-bound, so its
//!    timer fires about 99 times per second of its CPU time. One iteration
//!    is one signal; its value is the growth of `Stats::handler_ns` over
//!    the growth of `Stats::signals` (the handler times itself with
//!    `CLOCK_MONOTONIC` from entry to the published sample; the kernel's
//!    signal delivery and return are not in it, they are in group 1's
//!    on-CPU figure).
//! 4. `sampler_snapshot`: `Profile::to_snapshot`, `Profile::from_snapshot`,
//!    `Profile::save` (temporary file, synced, renamed) and `Profile::load`
//!    of a profile filled to within 2 % of the default 4 MiB budget,
//!    without shedding ([`full_profile`]): tasks with distinct names (one
//!    group each), each suspended under one of 4,096 distinct 4-frame
//!    stacks ([`wide`]), sampled in batches and resumed into one profile.
//!    Timed on the thread's CPU time (the `save` figure therefore leaves
//!    out the time waiting for the disk). The group's throughput is the
//!    snapshot's size, so criterion prints MiB/s, and `summary` reads the
//!    bytes from `benchmark.json`.
//!
//! The premises are checked, outside the timing: the idle population's dump has
//! exactly its tasks, idle, 3 frames each; after each tick run, every tick
//! read every task (`ok == ticks × tasks`, nothing torn) and the profile
//! holds one 3-frame stack per task; the workload's samplers read all
//! 1,000 tasks on every tick, with no mismatch between live chains and
//! published stacks; so did the handler's samples; a loaded snapshot
//! encodes back to the same bytes. The checks of a benchmark left out by a
//! filter are skipped.
//!
//! # How to read it
//!
//! ```text
//! sampler ns per task per tick = (tick(process CPU) - no sampler) / tasks
//! sampler / dump               = (tick(process CPU) - no sampler) / dump()
//! throughput loss              = sampler variant / no sampler - 1
//! ```
//!
//! Targets: at most 50 ns per task per tick; at most 1 % throughput loss at
//! 99 Hz with 1,000 tasks. `cargo run -p benches --bin summary` prints the
//! tables and verdicts; BENCHMARKS.md holds the last run.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use async_stack::sampler::{DEFAULT_BUDGET, Profile, Sampler, SamplerBuilder, Stats};
use benches::clock::{self, BenchClock, Scope};
use benches::{
    SAMPLER_APP_HZ, SAMPLER_APP_TASKS, SAMPLER_TICK_HZ, SAMPLER_TICK_TASKS, names, parked,
};
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use tokio::runtime::{Builder, Runtime};

/// Round trips each pair of the throughput workload makes per iteration.
const ROUNDS: u32 = 20;

/// Xorshift steps on every message of the throughput workload.
const WORK_STEPS: u32 = 1000;

/// A little CPU work: `steps` xorshift steps on `x`.
fn work(mut x: u64, steps: u32) -> u64 {
    for _ in 0..black_box(steps) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// The throughput workload: pairs of long-lived tasks ping-ponging over
/// channels, driven one batch of round trips per iteration.
mod app {
    use tokio::sync::mpsc::{self, Receiver, Sender};

    use super::{ROUNDS, WORK_STEPS, work};

    /// The task root of a pair's first side: for every command, `rounds`
    /// round trips with the other side, then the result to `done`.
    #[async_stack::traced_async]
    async fn lead(
        mut commands: Receiver<u32>,
        done: Sender<u64>,
        tx: Sender<u64>,
        mut rx: Receiver<u64>,
    ) {
        let mut x = 0x9e37_79b9_7f4a_7c15;
        while let Some(n) = commands.recv().await {
            x = rounds(true, n, x, &tx, &mut rx).await;
            done.send(x).await.expect("the driver is alive");
        }
    }

    /// The task root of a pair's second side: answers until the first
    /// side goes away.
    #[async_stack::traced_async]
    async fn follow(tx: Sender<u64>, mut rx: Receiver<u64>) {
        rounds(false, u32::MAX, 0, &tx, &mut rx).await;
    }

    #[async_stack::traced_async]
    async fn rounds(
        first: bool,
        n: u32,
        mut x: u64,
        tx: &Sender<u64>,
        rx: &mut Receiver<u64>,
    ) -> u64 {
        for _ in 0..n {
            match round(first, x, tx, rx).await {
                Some(y) => x = y,
                None => break,
            }
        }
        x
    }

    /// One round trip: send then receive (the first side), or receive then
    /// answer; every message received is worked on. `None` once the other
    /// side is gone.
    #[async_stack::traced_async]
    async fn round(first: bool, x: u64, tx: &Sender<u64>, rx: &mut Receiver<u64>) -> Option<u64> {
        if first {
            tx.send(x).await.ok()?;
            Some(work(rx.recv().await?, WORK_STEPS))
        } else {
            let y = work(rx.recv().await?, WORK_STEPS);
            tx.send(y).await.ok()?;
            Some(y)
        }
    }

    /// The live tasks, as their driver holds them.
    pub struct Pairs {
        commands: Vec<Sender<u32>>,
        done: Receiver<u64>,
    }

    impl Pairs {
        /// Spawns `tasks / 2` pairs on the current runtime; they live until
        /// the `Pairs` is dropped.
        pub fn spawn(tasks: usize) -> Pairs {
            let pairs = tasks / 2;
            let (done_tx, done) = mpsc::channel(pairs);
            let commands = (0..pairs)
                .map(|_| {
                    let (command_tx, command_rx) = mpsc::channel(1);
                    let (tx_a, rx_b) = mpsc::channel(1);
                    let (tx_b, rx_a) = mpsc::channel(1);
                    drop(async_stack::tokio::spawn(lead(
                        command_rx,
                        done_tx.clone(),
                        tx_a,
                        rx_a,
                    )));
                    drop(async_stack::tokio::spawn(follow(tx_b, rx_b)));
                    command_tx
                })
                .collect();
            Pairs { commands, done }
        }

        /// One iteration: [`ROUNDS`] round trips in every pair; the sum of
        /// the pairs' results.
        pub async fn iteration(&mut self) -> u64 {
            for c in &self.commands {
                c.send(ROUNDS).await.expect("a pair is alive");
            }
            let mut sum = 0u64;
            for _ in 0..self.commands.len() {
                let x = self.done.recv().await.expect("a pair is alive");
                sum = sum.wrapping_add(x);
            }
            sum
        }
    }
}

/// The idle population: `l3 -> l2 -> l1 -> park`, `Pending` forever.
mod idle {
    use benches::park;

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            /// One level of the idle chain.
            #[async_stack::traced_async]
            pub async fn $name() {
                $callee().await
            }
        };
    }
    benches::chain!(3, level, park);
}

/// Frames of every idle task.
const IDLE_DEPTH: usize = 3;

/// The snapshot population: 8 traced fns, any path of [`WIDE_DEPTH`] of
/// them down to `park`, so 8^4 = 4,096 distinct stacks.
mod wide {
    use std::future::Future;
    use std::pin::Pin;

    use benches::park;

    /// A boxed level (the path is chosen at run time).
    pub type Level = Pin<Box<dyn Future<Output = ()> + Send>>;

    macro_rules! fns {
        ($($name:ident),*) => {$(
            /// One level: awaits the level `path` names next.
            #[async_stack::traced_async]
            pub async fn $name(path: usize, depth: usize) {
                descend(path, depth).await
            }
        )*};
    }
    fns!(f0, f1, f2, f3, f4, f5, f6, f7);

    /// The level below: `f(path % 8)`, or the leaf at depth 0.
    pub fn descend(path: usize, depth: usize) -> Level {
        if depth == 0 {
            return Box::pin(park());
        }
        let (next, rest, depth) = (path % 8, path / 8, depth - 1);
        match next {
            0 => Box::pin(f0(rest, depth)),
            1 => Box::pin(f1(rest, depth)),
            2 => Box::pin(f2(rest, depth)),
            3 => Box::pin(f3(rest, depth)),
            4 => Box::pin(f4(rest, depth)),
            5 => Box::pin(f5(rest, depth)),
            6 => Box::pin(f6(rest, depth)),
            _ => Box::pin(f7(rest, depth)),
        }
    }
}

/// Traced frames of every snapshot-population task.
const WIDE_DEPTH: usize = 4;

/// Spawns `n` tasks with `spawn_one(i)` on a new `current_thread` runtime
/// and runs it until every one is parked; they live until the runtime is
/// dropped.
fn populate(n: usize, spawn_one: impl Fn(usize)) -> Runtime {
    let rt = Builder::new_current_thread()
        .build()
        .expect("cannot build the tokio runtime");
    let target = parked() + n;
    rt.block_on(async {
        for i in 0..n {
            spawn_one(i);
        }
        while parked() < target {
            tokio::task::yield_now().await;
        }
    });
    assert_eq!(parked(), target);
    rt
}

/// Starts a sampler, or panics (a bench cannot run without one).
fn start(builder: SamplerBuilder) -> Sampler {
    builder.start().expect("cannot start the sampler")
}

/// Waits (sleeping) until the sampler has taken `ticks` more ticks; the
/// counters before and after.
fn wait_ticks(sampler: &Sampler, ticks: u64) -> (Stats, Stats) {
    let before = sampler.stats();
    let target = before.ticks + ticks;
    loop {
        let now = sampler.stats();
        if now.ticks >= target {
            return (before, now);
        }
        let left = u32::try_from(target - now.ticks).unwrap_or(u32::MAX);
        std::thread::sleep(sampler.interval() * left);
    }
}

/// `total` measured over `got` units, scaled to the `wanted` criterion
/// asked for.
fn scaled(total: Duration, wanted: u64, got: u64) -> Duration {
    let ns = total.as_nanos() * u128::from(wanted) / u128::from(got.max(1));
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// What the timed iterations of a `sampler_throughput` variant took, and
/// what the sampler's own clocks say it spent meanwhile.
#[derive(Debug, Default)]
struct Attributed {
    iterations: u64,
    elapsed_ns: u128,
    sampler_cpu_ns: u64,
    handler_ns: u64,
}

impl Attributed {
    fn add(&mut self, iters: u64, elapsed: Duration, stats: Option<(Stats, Stats)>) {
        self.iterations += iters;
        self.elapsed_ns += elapsed.as_nanos();
        if let Some((s0, s1)) = stats {
            self.sampler_cpu_ns += s1.sampler_cpu_ns - s0.sampler_cpu_ns;
            self.handler_ns += s1.handler_ns - s0.handler_ns;
        }
    }

    fn per_iteration(&self, total: impl Into<u128>) -> f64 {
        total.into() as f64 / self.iterations.max(1) as f64
    }

    /// Prints the sampler's share of an iteration, against `baseline_ns`
    /// (the no-sampler iteration) when known.
    fn describe(&self, name: &str, baseline_ns: Option<f64>) {
        let sampler = self.per_iteration(self.sampler_cpu_ns);
        let handler = self.per_iteration(self.handler_ns);
        let of =
            |ns: f64| baseline_ns.map_or("n/a".to_owned(), |b| format!("{:.2} %", ns / b * 1e2));
        eprintln!(
            "{name}: per timed iteration, {:.2} ms of process CPU, of which the sampler thread \
             {:.1} µs ({} of the no-sampler iteration) and the signal handler {:.1} µs ({})",
            self.per_iteration(self.elapsed_ns) / 1e6,
            sampler / 1e3,
            of(sampler),
            handler / 1e3,
            of(handler),
        );
    }
}

/// One line of a profile's counters.
fn describe(label: &str, p: &Profile) {
    let s = p.stats();
    let secs = p.duration().as_secs_f64();
    let per = |n: u64, d: u64| n as f64 / d.max(1) as f64;
    eprintln!(
        "{label}: {secs:.1} s, {} ticks ({} late), {:.0} samples per tick, retried {}, torn {}, \
         drop rate {:.3} %, sampler CPU {:.3} % of a core ({:.1} µs per tick), {} signals ({:.1} per s, {} lost), \
         handler {:.0} ns per signal, {} mismatches, {} entries, {:.2} MiB of tables",
        s.ticks,
        s.late_ticks,
        per(s.ok, s.ticks),
        s.retried,
        s.dropped_torn,
        100.0
            * per(
                s.dropped_torn + s.dropped_inconsistent + s.signals_lost,
                s.attempted + s.signals_lost
            ),
        s.sampler_cpu_ns as f64 / 1e7 / secs,
        per(s.sampler_cpu_ns, s.ticks) / 1e3,
        s.signals,
        s.signals as f64 / secs,
        s.signals_lost,
        per(s.handler_ns, s.signals),
        s.mismatches,
        p.stacks().count(),
        p.memory_bytes() as f64 / f64::from(1 << 20),
    );
}

fn sampler_throughput(c: &mut Criterion<BenchClock>) {
    let rt = Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("cannot build the tokio runtime");
    let mut pairs = rt.block_on(async { app::Pairs::spawn(SAMPLER_APP_TASKS) });
    // Every task is live (and the workers have polled task roots before
    // any on-CPU timer is set).
    rt.block_on(pairs.iteration());
    assert_eq!(async_stack::dump().tasks.len(), SAMPLER_APP_TASKS);
    let mut group = c.benchmark_group(names::SAMPLER_THROUGHPUT);
    group.sampling_mode(SamplingMode::Flat).sample_size(20);
    let variants = [
        (names::NO_SAMPLER, None),
        (
            names::SAMPLER_WALL,
            Some(Sampler::builder().frequency_hz(SAMPLER_APP_HZ)),
        ),
        (
            names::SAMPLER_ON_CPU,
            Some(Sampler::builder().frequency_hz(SAMPLER_APP_HZ).on_cpu(true)),
        ),
    ];
    // Process CPU per iteration without a sampler (the timed iterations'
    // mean), to weigh what each sampler's own clocks account for.
    let mut baseline_ns = None;
    for (name, builder) in variants {
        let sampler = builder.map(start);
        let mut ran = false;
        let mut timed = Attributed::default();
        group.bench_function(BenchmarkId::new(name, SAMPLER_APP_TASKS), |b| {
            ran = true;
            b.iter_custom(|iters| {
                let s0 = sampler.as_ref().map(Sampler::stats);
                let t0 = clock::read(Scope::Process);
                for _ in 0..iters {
                    black_box(rt.block_on(pairs.iteration()));
                }
                let elapsed = clock::read(Scope::Process) - t0;
                timed.add(iters, elapsed, s0.zip(sampler.as_ref().map(Sampler::stats)));
                elapsed
            });
        });
        let profile = sampler.map(Sampler::stop);
        if !ran {
            continue;
        }
        let Some(p) = profile else {
            baseline_ns = Some(timed.per_iteration(timed.elapsed_ns));
            continue;
        };
        describe(&format!("{name}, {SAMPLER_APP_TASKS} tasks"), &p);
        timed.describe(name, baseline_ns);
        // Every tick read every task (a torn copy is retried, rarely
        // dropped); on-CPU samples count as attempts too.
        let s = p.stats();
        assert_eq!(
            s.attempted,
            s.ticks * SAMPLER_APP_TASKS as u64 + s.signals,
            "{s:?}"
        );
        assert_eq!(s.mismatches, 0, "{:?}", p.mismatches());
    }
    group.finish();
    drop(pairs);
    drop(rt);
}

fn sampler_tick(c: &mut Criterion<BenchClock>) {
    let mut group = c.benchmark_group(names::SAMPLER_TICK);
    group.sampling_mode(SamplingMode::Flat).sample_size(20);
    for tasks in SAMPLER_TICK_TASKS {
        let rt = populate(tasks, |_| drop(async_stack::tokio::spawn(idle::l3())));
        check_idle(&async_stack::dump(), tasks);
        tick_group(&mut group, tasks);
        drop(rt);
    }
    group.finish();
}

/// The premise of the tick figures: the dump holds exactly `tasks` idle
/// tasks of [`IDLE_DEPTH`] frames.
fn check_idle(dump: &async_stack::TaskDump, tasks: usize) {
    assert_eq!(dump.tasks.len(), tasks, "live async-stack tasks");
    for task in &dump.tasks {
        assert_eq!(task.state, async_stack::TaskState::Idle);
        assert_eq!(task.frames.len(), IDLE_DEPTH, "task {}", task.id);
    }
}

fn tick_group(group: &mut BenchmarkGroup<'_, BenchClock>, tasks: usize) {
    let interval = Duration::from_secs(1) / SAMPLER_TICK_HZ;
    group.bench_function(BenchmarkId::new(names::NO_SAMPLER, tasks), |b| {
        b.iter_custom(|iters| {
            let t0 = clock::read(Scope::Process);
            std::thread::sleep(interval * u32::try_from(iters).unwrap_or(u32::MAX));
            clock::read(Scope::Process) - t0
        });
    });
    let sampler = start(Sampler::builder().frequency_hz(SAMPLER_TICK_HZ));
    let mut ran = false;
    group.bench_function(BenchmarkId::new(names::SAMPLER_TICK_PROCESS, tasks), |b| {
        ran = true;
        b.iter_custom(|iters| {
            let t0 = clock::read(Scope::Process);
            let (s0, s1) = wait_ticks(&sampler, iters);
            let cpu = clock::read(Scope::Process) - t0;
            scaled(cpu, iters, s1.ticks - s0.ticks)
        });
    });
    group.bench_function(BenchmarkId::new(names::SAMPLER_TICK_SELF, tasks), |b| {
        ran = true;
        b.iter_custom(|iters| {
            let (s0, s1) = wait_ticks(&sampler, iters);
            let cpu = Duration::from_nanos(s1.sampler_cpu_ns - s0.sampler_cpu_ns);
            scaled(cpu, iters, s1.ticks - s0.ticks)
        });
    });
    let profile = sampler.stop();
    if ran {
        describe(&format!("tick, {tasks} idle tasks"), &profile);
        // Every tick read every task, whole; one stack per task, 3 frames.
        let s = profile.stats();
        assert_eq!(s.ok, s.ticks * tasks as u64, "{s:?}");
        assert_eq!((s.dropped_torn, s.dropped_inconsistent), (0, 0), "{s:?}");
        assert_eq!(profile.stacks().count(), tasks);
        assert!(profile.stacks().all(|st| st.frames().len() == IDLE_DEPTH));
    }
    group.bench_function(BenchmarkId::new(names::SAMPLER_DUMP_PEER, tasks), |b| {
        b.iter(async_stack::dump);
    });
}

/// Chunks of CPU-bound work between two looks at the handler's counters.
const SPIN_CHUNK: u64 = 1000;

fn spin() {
    black_box(work(black_box(1), WORK_STEPS));
}

fn sampler_handler(c: &mut Criterion<BenchClock>) {
    // This thread polls a task root before the sampler starts, so that the
    // sampler's first tick gives it a timer.
    benches::time_in_traced_chain(1, spin);
    let mut group = c.benchmark_group(names::SAMPLER_HANDLER);
    group.sampling_mode(SamplingMode::Flat).sample_size(20);
    let sampler = start(Sampler::builder().frequency_hz(SAMPLER_APP_HZ).on_cpu(true));
    let mut ran = false;
    group.bench_function(names::HANDLER_PER_SIGNAL, |b| {
        ran = true;
        b.iter_custom(|iters| {
            let s0 = sampler.stats();
            let mut s1 = s0;
            while s1.signals < s0.signals + iters {
                benches::time_in_traced_chain(SPIN_CHUNK, spin);
                s1 = sampler.stats();
            }
            let handler = Duration::from_nanos(s1.handler_ns - s0.handler_ns);
            scaled(handler, iters, s1.signals - s0.signals)
        });
    });
    group.finish();
    let profile = sampler.stop();
    if ran {
        describe("on-CPU handler, CPU-bound traced chain", &profile);
        let s = profile.stats();
        assert!(s.signals > 0, "{s:?}");
        assert_eq!(s.mismatches, 0, "{:?}", profile.mismatches());
    }
}

/// A profile filled to within 2 % of [`DEFAULT_BUDGET`] without shedding:
/// batches of named tasks, each sampled for two ticks and resumed into the
/// same profile, the last batches sized to the room left.
fn full_profile() -> Profile {
    let mut profile: Option<Profile> = None;
    let (mut spawned, mut batch, mut used) = (0usize, 4096usize, 0usize);
    loop {
        let first = spawned;
        let rt = populate(batch, |i| {
            let i = first + i;
            drop(async_stack::tokio::spawn_named(
                format!("connection-{i:06}"),
                wide::descend(i, WIDE_DEPTH),
            ));
        });
        let mut builder = Sampler::builder().frequency_hz(SAMPLER_TICK_HZ);
        if let Some(p) = profile.take() {
            builder = builder.resume(p);
        }
        let sampler = start(builder);
        wait_ticks(&sampler, 2);
        let p = sampler.stop();
        drop(rt);
        spawned += batch;
        let s = p.stats();
        assert_eq!((s.cleared_stacks, s.dropped_groups), (0, 0), "{s:?}");
        let room = DEFAULT_BUDGET - p.memory_bytes();
        if room < DEFAULT_BUDGET / 50 {
            eprintln!("full profile: {spawned} tasks");
            return p;
        }
        let per_task = (p.memory_bytes() - used).div_ceil(batch);
        used = p.memory_bytes();
        batch = (room * 9 / 10 / per_task).clamp(1, 4096);
        profile = Some(p);
    }
}

fn sampler_snapshot(c: &mut Criterion<BenchClock>) {
    let profile = full_profile();
    describe("snapshot profile", &profile);
    let bytes = profile.to_snapshot();
    let loaded = Profile::from_snapshot(&bytes).expect("a valid snapshot");
    assert_eq!(loaded.to_snapshot(), bytes, "a snapshot round-trips");
    eprintln!(
        "snapshot: {} bytes ({:.2} MiB) of a profile of {:.2} MiB of tables (budget {:.0} MiB)",
        bytes.len(),
        bytes.len() as f64 / f64::from(1 << 20),
        profile.memory_bytes() as f64 / f64::from(1 << 20),
        DEFAULT_BUDGET as f64 / f64::from(1 << 20),
    );
    let path: PathBuf =
        std::env::temp_dir().join(format!("async-stack-bench-{}.asprof", std::process::id()));
    // The file `load` reads (and `save` rewrites, the same bytes).
    profile.save(&path).expect("cannot save the snapshot");
    assert_eq!(std::fs::read(&path).expect("saved"), bytes);
    let mut group = c.benchmark_group(names::SAMPLER_SNAPSHOT);
    group
        .sample_size(20)
        .throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function(names::TO_SNAPSHOT, |b| {
        b.iter_with_large_drop(|| profile.to_snapshot());
    });
    group.bench_function(names::FROM_SNAPSHOT, |b| {
        b.iter_with_large_drop(|| Profile::from_snapshot(black_box(&bytes)).expect("valid"));
    });
    group.bench_function(names::SAVE, |b| {
        b.iter(|| profile.save(&path).expect("cannot save the snapshot"));
    });
    group.bench_function(names::LOAD, |b| {
        b.iter_with_large_drop(|| Profile::load(&path).expect("cannot load the snapshot"));
    });
    group.finish();
    let _ = std::fs::remove_file(&path);
}

criterion_group! {
    name = process;
    config = benches::clock::criterion_process();
    targets = sampler_throughput, sampler_tick
}
criterion_group! {
    name = thread;
    config = benches::clock::criterion();
    targets = sampler_handler, sampler_snapshot
}
criterion_main!(process, thread);
