//! Shared pieces of the async-stack benchmarks.
//!
//! Everything here is identical for every variant a benchmark compares, so
//! that the difference between two variants is the instrumentation alone:
//!
//! - [`YieldN`] / [`yield_leaf`]: the leaf of every chain. It returns
//!   `Pending` a fixed number of times (waking itself through the no-op
//!   waker), so every poll of the chain's root walks down through all levels.
//! - [`warm_up_clock`]: what the callgrind probes do before they measure.
//! - [`poll_to_completion`]: the "executor". A hand-written loop with
//!   [`Waker::noop`], no runtime. The future is polled through a
//!   `Pin<&mut dyn Future>` hidden behind [`black_box`], the way a runtime
//!   polls a task through its vtable: the compiler can neither devirtualize
//!   the poll nor fold consecutive polls together.
//! - [`chain!`]: defines the levels `l1..=l8`, `l1..=l9` or `l1..=l32` of a
//!   chain from a per-level macro, so that every depth is a distinct,
//!   statically nested type (no `Box::pin` per level in any variant).
//! - [`Timed`] / [`timed_leaf`]: a leaf that runs a closure-free `fn()` many
//!   times *inside* the poll of a chain and returns the elapsed time, for
//!   `iter_custom` benchmarks of things that must run inside a traced poll
//!   (capturing a backtrace).
//! - [`traced8`]: the depth-8 `#[traced_async]` chain ending in [`Timed`],
//!   shared by the `capture` bench and the `cold_resolve` binary.
//! - [`dump_population`]: the 10,000 suspended tasks, 9 frames deep, that
//!   the `dump` bench and the `dump_cold_probe` binary dump.
//! - [`root_poll`]: the boxed chains of the `root_poll` bench and the
//!   `root_poll_probe` binary, whose roots are polled many times each.
//! - [`memory`]: the memory probe's population of live, suspended tokio
//!   tasks per variant, and how its resident memory is read; used by the
//!   `mem_probe` binary and the `memory` bench.
//! - [`clock`]: the clock all benches read, this thread's CPU time (the
//!   process's, for work that runs on other threads) unless
//!   `BENCH_CLOCK=wall`, and the criterion configurations that use it.
//! - [`park`]: the leaf of the suspended populations ([`dump_population`],
//!   [`memory`]), which counts the tasks that reached it ([`parked`]).
//! - [`names`], [`DEPTHS`], [`PENDING_PER_FUTURE`], [`SPAWN_TASKS`],
//!   [`DUMP_TASKS`], [`DUMP_DEPTH`], the `SAMPLER_*` constants: the
//!   benchmark ids and parameters, shared by the benches and the `summary`
//!   binary that turns criterion's `estimates.json` files into the tables
//!   of BENCHMARKS.md.

use std::future::Future;
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub mod calls;
pub mod clock;
pub mod dump_population;
pub mod memory;
pub mod root_poll;

/// How many times the leaf of a `poll_depth` chain returns `Pending`.
///
/// A future is created, polled [`POLLS_PER_FUTURE`] times and dropped per
/// iteration, so one-off costs (task-root registration, first-poll set-up of
/// every level) are spread over this many polls.
pub const PENDING_PER_FUTURE: u32 = 1000;

/// Polls per future in `poll_depth`: every `Pending` plus the final `Ready`.
pub const POLLS_PER_FUTURE: u32 = PENDING_PER_FUTURE + 1;

/// The chain depths measured by `poll_depth`.
pub const DEPTHS: [u32; 3] = [1, 8, 32];

/// Tasks spawned (and awaited) per iteration of the `spawn` bench.
pub const SPAWN_TASKS: u32 = 1000;

/// Polls per task in the `spawn` bench: ready at once, or after yielding
/// once.
pub const SPAWN_POLLS: [u32; 2] = [1, 2];

/// Live, suspended tasks the `dump` bench dumps.
pub const DUMP_TASKS: usize = 10_000;

/// Instrumented frames per task in the `dump` bench.
pub const DUMP_DEPTH: usize = 9;

/// Live, idle tasks the `sampler` bench measures a tick over.
pub const SAMPLER_TICK_TASKS: [usize; 2] = [1_000, 10_000];

/// The `sampler` bench's tick frequency for the tick cost, in Hz.
pub const SAMPLER_TICK_HZ: u32 = 1000;

/// Tasks of the `sampler` bench's throughput workload.
pub const SAMPLER_APP_TASKS: usize = 1_000;

/// The `sampler` bench's frequency for the throughput workload, in Hz.
pub const SAMPLER_APP_HZ: u32 = 99;

/// Benchmark group and function ids, shared by the benches and `summary`.
pub mod names {
    /// Group of `benches/poll_depth.rs`.
    pub const POLL_DEPTH: &str = "poll_depth";
    /// Group of `benches/root.rs`.
    pub const ROOT: &str = "root";
    /// Group of `benches/root.rs` inside a tokio task.
    pub const ROOT_TOKIO: &str = "root_tokio";
    /// Group of `benches/root_poll.rs`.
    pub const ROOT_POLL: &str = "root_poll";
    /// Group of `benches/calls.rs`.
    pub const CALLS: &str = "calls";
    /// Group of `benches/calls.rs`: the wide task.
    pub const CALLS_WIDE: &str = "calls_wide";
    /// Group of `benches/capture.rs`.
    pub const CAPTURE: &str = "capture";
    /// Group of `benches/spawn.rs` on a `current_thread` tokio runtime.
    pub const SPAWN_CURRENT_THREAD: &str = "spawn_current_thread";
    /// Group of `benches/spawn.rs` on a `multi_thread` runtime, 2 workers.
    pub const SPAWN_MULTI_THREAD: &str = "spawn_multi_thread";
    /// Group of `benches/spawn.rs` on a `current_thread` runtime where each
    /// task is awaited as soon as it is spawned, so every join waits.
    pub const SPAWN_JOIN_CURRENT_THREAD: &str = "spawn_join_current_thread";
    /// Group of `benches/dump.rs`.
    pub const DUMP: &str = "dump";
    /// Group of `benches/dump_cold.rs` on the benchmark clock: the first
    /// dump in a fresh process.
    pub const DUMP_COLD: &str = "dump_cold";
    /// Group of `benches/dump_cold.rs` whose "time" is bytes allocated by
    /// the same dumps.
    pub const DUMP_COLD_ALLOC: &str = "dump_cold_alloc";
    /// Group of `benches/memory.rs`: resident bytes per live task.
    pub const MEMORY: &str = "memory";

    /// Plain async fns: the baseline of `poll_depth`, `root` and `spawn`.
    pub const UNTRACED: &str = "untraced";
    /// `#[async_stack::traced_async]` on every level.
    pub const ASYNC_STACK: &str = "async-stack";
    /// `async_stack::TracedExt::traced()` around a plain async fn.
    pub const ASYNC_STACK_TRACED_EXT: &str = "async-stack .traced()";
    /// `#[async_backtrace::framed]` on every level.
    pub const ASYNC_BACKTRACE: &str = "async-backtrace";
    /// `await_tree::InstrumentAwait::instrument_await` on every level.
    pub const AWAIT_TREE: &str = "await-tree";
    /// `poll_depth`'s control: a wrapper that only links each level to the
    /// thread's current one and back (the least any frame recording does).
    pub const CONTROL: &str = "control: link only";
    /// `memory`'s baseline: plain async fns, `tokio::spawn`ed (what
    /// `untraced` is elsewhere; the probe's command line calls it
    /// `control`).
    pub const MEMORY_CONTROL: &str = "control";

    /// `async_stack::backtrace()` alone.
    pub const CAPTURE_ONLY: &str = "async-stack capture";
    /// `async_stack::backtrace()` then `format!("{bt}")`, symbols cached.
    pub const CAPTURE_RESOLVE_WARM: &str = "async-stack capture+format warm";
    /// `std::backtrace::Backtrace::force_capture()` alone.
    pub const STD_CAPTURE_ONLY: &str = "std force_capture";
    /// `std::backtrace::Backtrace::force_capture()` then `.to_string()`.
    pub const STD_CAPTURE_RESOLVE: &str = "std force_capture+to_string";

    /// `spawn`: `async_stack::tokio::spawn(traced())`, the helper that also
    /// records the spawn location and the spawning task.
    pub const ASYNC_STACK_SPAWN_HELPER: &str = "async-stack spawn helper";

    /// `dump`: `async_stack::dump()`, the snapshot alone.
    pub const DUMP_SNAPSHOT: &str = "async-stack dump()";
    /// `dump`: `async_stack::dump().to_string()`, snapshot + Go-style text.
    pub const DUMP_TEXT: &str = "async-stack dump().to_string()";
    /// `dump`: `async_stack::dump().to_text(false)`, into a `String`
    /// allocated up front.
    pub const DUMP_TO_TEXT: &str = "async-stack dump().to_text(false)";
    /// `dump`: `async_stack::dump::write_text(io::sink())`, the streamed
    /// text, one task at a time.
    pub const DUMP_WRITE_TEXT: &str = "async-stack write_text(sink)";
    /// `dump_cold`: the first `write_text` of a process, into a sink.
    pub const COLD_WRITE_TEXT: &str = "first write_text(sink)";
    /// `dump_cold`: the first `dump().to_string()` of a process.
    pub const COLD_TO_STRING: &str = "first dump().to_string()";
    /// `dump`: `async_stack::dump().to_json()`, snapshot + JSON.
    pub const DUMP_JSON: &str = "async-stack dump().to_json()";
    /// `dump`: `TaskDump::to_json()` of a dump taken once, the JSON alone.
    pub const DUMP_TO_JSON: &str = "async-stack to_json() of a dump";
    /// `dump`: `async_stack::dump::write_json(io::sink())`, the streamed
    /// JSON, one task at a time.
    pub const DUMP_WRITE_JSON: &str = "async-stack write_json(sink)";
    /// `dump`: `async_backtrace::taskdump_tree(false)`.
    pub const AB_TASKDUMP: &str = "async-backtrace taskdump_tree(false)";
    /// `dump`: `await_tree::Registry::collect_all()`, the snapshot alone.
    pub const AT_COLLECT: &str = "await-tree collect_all()";
    /// `dump`: `collect_all()`, then every tree rendered to a string.
    pub const AT_COLLECT_TEXT: &str = "await-tree collect_all()+to_string";

    /// Group of `benches/sampler.rs` whose "time" is process CPU time per
    /// tick interval (or per dump) over idle tasks.
    pub const SAMPLER_TICK: &str = "sampler_tick";
    /// Group of `benches/sampler.rs`: process CPU time per round of the
    /// ping-pong workload.
    pub const SAMPLER_THROUGHPUT: &str = "sampler_throughput";
    /// Group of `benches/sampler.rs` whose "time" is the on-CPU signal
    /// handler's own time per signal (`handler_ns / signals`).
    pub const SAMPLER_HANDLER: &str = "sampler_handler";
    /// Group of `benches/sampler.rs`: snapshot encode, decode, save and
    /// load of a profile filled to the default budget.
    pub const SAMPLER_SNAPSHOT: &str = "sampler_snapshot";

    /// `sampler_tick`: the idle tasks and no sampler, process CPU time
    /// over one tick interval (the baseline).
    pub const NO_SAMPLER: &str = "no sampler";
    /// `sampler_tick`: process CPU time per tick of the wall-clock sampler.
    pub const SAMPLER_TICK_PROCESS: &str = "sampler tick (process CPU)";
    /// `sampler_tick`: the sampler thread's own account of a tick,
    /// `Stats::sampler_cpu_ns / Stats::ticks`.
    pub const SAMPLER_TICK_SELF: &str = "sampler tick (sampler_cpu_ns)";
    /// `sampler_tick`: one `async_stack::dump()` of the same tasks, the
    /// peer (a dump reads every task once too).
    pub const SAMPLER_DUMP_PEER: &str = "async_stack::dump()";
    /// `sampler_throughput`: the workload with the wall-clock sampler.
    pub const SAMPLER_WALL: &str = "wall-clock sampler";
    /// `sampler_throughput`: the workload with the on-CPU sampler (which
    /// runs the wall-clock ticks too).
    pub const SAMPLER_ON_CPU: &str = "on-CPU sampler";
    /// `sampler_handler`: `handler_ns / signals`.
    pub const HANDLER_PER_SIGNAL: &str = "handler per signal";
    /// `sampler_snapshot`: `Profile::to_snapshot`.
    pub const TO_SNAPSHOT: &str = "to_snapshot";
    /// `sampler_snapshot`: `Profile::from_snapshot`.
    pub const FROM_SNAPSHOT: &str = "from_snapshot";
    /// `sampler_snapshot`: `Profile::save` into the temporary directory.
    pub const SAVE: &str = "save";
    /// `sampler_snapshot`: `Profile::load` of that file.
    pub const LOAD: &str = "load";
    /// Group of `benches/wake.rs`.
    pub const WAKE: &str = "wake";
    /// `wake`: one poll of a pending task root.
    pub const WAKE_POLL: &str = "poll";
    /// `wake`: one poll that wakes another task [`super::WAKES_PER_POLL`]
    /// times.
    pub const WAKE_FROM_TASK: &str = "wake from task";
    /// `wake`: one wake from outside any poll.
    pub const WAKE_FROM_RUNTIME: &str = "wake from runtime";
    /// `wake`: a poll of the woken task, then one wake of it.
    pub const WAKE_AFTER_POLL: &str = "poll then wake";
    /// `wake`: recording off.
    pub const WAKE_OFF: &str = "off";
    /// `wake`: recording on.
    pub const WAKE_ON: &str = "on";
}

/// `wake`: how many wakes one poll of the waking task makes.
pub const WAKES_PER_POLL: u32 = 100;

/// Tasks of this process that have reached their [`Park`] leaf.
static PARKED: AtomicUsize = AtomicUsize::new(0);

/// How many tasks of this process have reached their [`Park`] leaf.
pub fn parked() -> usize {
    PARKED.load(Ordering::Relaxed)
}

/// The leaf of the populations of suspended tasks (the `dump` benches'
/// and the memory probe's): `Pending` forever, never wakes anyone. It
/// counts its first poll ([`parked`]), so that whoever spawns a population
/// knows when every task has reached it.
#[derive(Debug)]
pub struct Park {
    counted: bool,
}

impl Future for Park {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if !self.counted {
            self.counted = true;
            PARKED.fetch_add(1, Ordering::Relaxed);
        }
        Poll::Pending
    }
}

/// A new [`Park`] leaf.
pub fn park() -> Park {
    Park { counted: false }
}

/// A leaf future that returns `Pending` `remaining` times, waking itself each
/// time, then `Ready(())`.
#[derive(Debug)]
pub struct YieldN {
    remaining: u32,
}

impl Future for YieldN {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.remaining == 0 {
            return Poll::Ready(());
        }
        self.remaining -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The leaf of every `poll_depth` chain: a plain (never instrumented) future
/// that is `Pending` `pending` times.
pub fn yield_leaf(pending: u32) -> YieldN {
    YieldN { remaining: pending }
}

/// Polls `fut` until it is ready with a no-op waker; returns its output and
/// the number of polls.
///
/// See the crate docs for why the poll goes through a `black_box`ed
/// `Pin<&mut dyn Future>`.
pub fn poll_to_completion<F: Future>(fut: F) -> (F::Output, u32) {
    let mut fut = pin!(fut);
    let mut fut: Pin<&mut dyn Future<Output = F::Output>> = black_box(fut.as_mut());
    let mut cx = Context::from_waker(Waker::noop());
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return (out, polls);
        }
    }
}

/// For the callgrind probes (`root_poll_probe`, `locks_probe`): polls one
/// traced task root, which starts async-stack's clock thread, then lets
/// that thread run before anything is measured.
///
/// Under valgrind, threads take turns, and a main thread that never
/// blocks may run all its polls before the clock thread has stored a
/// first time: every task poll would then read the system clock instead
/// (about 90 instructions more), in some runs and not others.
pub fn warm_up_clock() {
    use async_stack::TracedExt;
    assert_eq!(poll_to_completion(yield_leaf(0).traced()).1, 1);
    std::thread::sleep(Duration::from_millis(50));
}

/// A leaf future that, on its only poll, runs `work` `iters` times and
/// returns how long that took on the [`clock`]. For `iter_custom` inside a
/// traced chain.
#[derive(Debug)]
pub struct Timed {
    iters: u64,
    work: fn(),
}

impl Future for Timed {
    type Output = Duration;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Duration> {
        let start = clock::now();
        for _ in 0..self.iters {
            (self.work)();
        }
        Poll::Ready(clock::now().saturating_sub(start))
    }
}

/// The leaf of the `capture` chain: runs `work` `iters` times in one poll.
pub fn timed_leaf(iters: u64, work: fn()) -> Timed {
    Timed { iters, work }
}

/// The depth-8 `#[traced_async]` chain that ends in [`Timed`]: `l8` (the
/// task root when polled from outside) down to `l1`, which awaits
/// [`timed_leaf`]. `work` therefore runs with eight traced frames active.
pub mod traced8 {
    use std::time::Duration;

    use super::timed_leaf;

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            /// One level of the chain: awaits the level below.
            #[async_stack::traced_async]
            pub async fn $name(iters: u64, work: fn()) -> Duration {
                $callee(iters, work).await
            }
        };
    }
    crate::chain!(8, level, timed_leaf);
}

/// Runs `work` `iters` times inside the eight traced frames of [`traced8`]
/// and returns the time the loop took (creating and polling the chain is
/// outside the measurement).
pub fn time_in_traced_chain(iters: u64, work: fn()) -> Duration {
    poll_to_completion(traced8::l8(iters, work)).0
}

/// Defines the levels of a chain: `l1` calls `$leaf`, and `lN` calls
/// `l(N-1)`, for N up to 3, 8, 9, 16 or 32.
///
/// `$level` is a macro invoked once per level as `$level!(lN => callee)`; it
/// defines `lN`, with whatever instrumentation and signature the variant
/// needs, as an async fn that awaits `callee(..)`. Writing each depth out
/// keeps every variant free of per-level boxing.
#[macro_export]
macro_rules! chain {
    (3, $level:ident, $leaf:ident) => {
        $level!(l1 => $leaf);
        $level!(l2 => l1);
        $level!(l3 => l2);
    };
    (8, $level:ident, $leaf:ident) => {
        $crate::chain!(3, $level, $leaf);
        $level!(l4 => l3);
        $level!(l5 => l4);
        $level!(l6 => l5);
        $level!(l7 => l6);
        $level!(l8 => l7);
    };
    (9, $level:ident, $leaf:ident) => {
        $crate::chain!(8, $level, $leaf);
        $level!(l9 => l8);
    };
    (16, $level:ident, $leaf:ident) => {
        $crate::chain!(9, $level, $leaf);
        $level!(l10 => l9);
        $level!(l11 => l10);
        $level!(l12 => l11);
        $level!(l13 => l12);
        $level!(l14 => l13);
        $level!(l15 => l14);
        $level!(l16 => l15);
    };
    (32, $level:ident, $leaf:ident) => {
        $crate::chain!(16, $level, $leaf);
        $level!(l17 => l16);
        $level!(l18 => l17);
        $level!(l19 => l18);
        $level!(l20 => l19);
        $level!(l21 => l20);
        $level!(l22 => l21);
        $level!(l23 => l22);
        $level!(l24 => l23);
        $level!(l25 => l24);
        $level!(l26 => l25);
        $level!(l27 => l26);
        $level!(l28 => l27);
        $level!(l29 => l28);
        $level!(l30 => l29);
        $level!(l31 => l30);
        $level!(l32 => l31);
    };
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn yield_leaf_is_pending_the_given_number_of_times() {
        assert_eq!(poll_to_completion(yield_leaf(0)), ((), 1));
        assert_eq!(poll_to_completion(yield_leaf(3)), ((), 4));
    }

    /// The premise of the `capture` bench: its work runs under exactly eight
    /// async frames.
    #[test]
    fn traced8_runs_work_under_eight_async_frames() {
        static DEPTH: AtomicUsize = AtomicUsize::new(0);
        fn record() {
            DEPTH.store(async_stack::backtrace().async_depth(), Ordering::Relaxed);
        }
        time_in_traced_chain(1, record);
        assert_eq!(DEPTH.load(Ordering::Relaxed), 8);
    }
}
