//! A sampling profiler for async tasks: consistent stacks of every task,
//! read from another thread without pausing any.
//!
//! ```no_run
//! use async_stack::sampler::{Profile, Sampler};
//!
//! # fn main() -> std::io::Result<()> {
//! let sampler = Sampler::builder()
//!     .frequency_hz(99) // the default
//!     .on_cpu(true)     // Linux: native and async frames from one instant
//!     .start()?;
//! // ... the program runs ...
//! let profile: Profile = sampler.stop();
//! println!("{:?}", profile.stats());
//! profile.write_folded(&mut std::fs::File::create("profile.folded")?)?;
//! profile.save("app.asprof")?;
//! let again = Profile::load("app.asprof").expect("a valid snapshot");
//! # Ok(())
//! # }
//! ```
//!
//! # Wall-clock sampling (every platform)
//!
//! A background thread, `async-stack-sampler`, wakes `frequency_hz` times
//! a second. On each tick it copies the published stack of every live
//! task (see [`crate::task`]) under the task's sequence counter: a copy
//! that raced with the task's thread is retried, and after 64 tries
//! dropped and counted ([`Stats::dropped_torn`]). Each copy is one instant
//! of one task, so a reported stack is always one that existed.
//!
//! - A task inside a poll gives one **on-CPU** sample: the path from the
//!   task root to the frame being polled.
//! - A suspended task gives one **off-CPU** sample per pending branch (a
//!   `join!` has several), each ending at the `.await` it waits on; the
//!   tick's weight is shared among the branches.
//! - With more live tasks than [`SamplerBuilder::max_tasks_per_tick`], the
//!   sampler keeps every running task and a uniform random subset
//!   (reservoir sampling) of the others, and gives each kept task the
//!   weight of the ones it stands for, so that totals stay unbiased.
//!
//! # Tasks
//!
//! A task is what a dump lists as one entry. With the `tokio` feature,
//! every traced root first polled inside one tokio task (a plain
//! `tokio::spawn(async { tokio::join!(left(), right()) })` polls two) is
//! one task of the profile, sampled once per tick:
//!
//! - its samples are those of its running root, if one is inside a poll
//!   (on-CPU); else one off-CPU stack per pending branch of every root,
//!   the roots in the order of their first poll, sharing the tick's
//!   weight, as the branches of a `join!` inside one root always did;
//! - its id ([`StackSample::task_id`]) is its first root's task id, its
//!   name ([`StackSample::task_name`]) and spawn site those of the first
//!   root that has one, and a task with neither is grouped under its
//!   first root's function: every root's stacks fall in one group;
//! - [`StackSample::tokio_id`] is the tokio task's id, the number
//!   `JoinHandle::id()` displays (the pprof label `tokio_task_id`).
//!
//! Its roots are read one after the other, each at one instant: a tokio
//! task whose poll moves from one root to the next between two reads can
//! be seen with neither running. A root first polled outside any tokio
//! task (in a `block_on`, on another executor) is a task of its own, as
//! is every root without the feature. The counters ([`Stats::attempted`],
//! [`Stats::ok`], [`Stats::reservoir_skipped`]...) count tasks so.
//!
//! Samples are aggregated by interned ids: each call and await site is
//! resolved to text once per profile, and a task sampled with the same
//! stacks as at its previous sample adds its weights to the entries that
//! sample went to, with no hashing and no allocation (the sampler
//! thread's caches, `sampler/cache.rs`).
//!
//! # On-CPU sampling (Linux)
//!
//! With [`SamplerBuilder::on_cpu`], every thread that polls tasks gets a
//! timer on its own CPU-time clock (`timer_create` with
//! `CLOCK_THREAD_CPUTIME_ID`, delivered to that thread as a real-time
//! signal). The signal handler, on the interrupted thread, takes from one
//! instant:
//!
//! - the native frames, by following frame pointers from the interrupted
//!   registers, only while the interrupted stack pointer lies in the
//!   thread's own stack and only up to its top: code running on another
//!   stack (a coroutine or `stacker` segment, a `sigaltstack` handler)
//!   keeps its interrupted address only, so the handler never reads
//!   memory that may not be mapped;
//! - the thread's async chain, by following the live frames' parent
//!   pointers, and a copy of the task's published stack.
//!
//! It allocates nothing and takes no lock: it writes into a buffer the
//! sampler preallocated for the thread, which the sampler thread drains.
//! When the thread exits, the sampler drains its buffer one last time and
//! gives it to the next thread: memory stays bounded by the threads
//! sampled at once.
//!
//! The signal is the highest real-time signal with no handler that the
//! starting thread does not block, never `SIGPROF`, so profilers driven
//! by `setitimer` (pprof-rs, gperftools), which own `SIGPROF`, run beside
//! it before, during and after a session. Each session start checks that
//! the handler is still ours (reinstalling it, or picking another free
//! signal if another handler took it), and a thread whose signals stop
//! arriving (it blocks them, or another handler took them) has the
//! periods of CPU time it ran meanwhile counted in
//! [`Stats::signals_lost`]. The session ends with the sampler thread, even
//! if it panics or never starts.
//! Native frames are stored as module, build id and offset (see
//! [`FrameRef::Native`]) and symbolised at export, so a profile loaded in
//! another process still symbolises while the binary is at hand.
//!
//! A sample keeps the native frames above its innermost poll: up to the
//! first frame that holds a `Traced::poll`. The sampler thread finds that
//! frame with the symboliser the export names frames with (one path, see
//! the readers' `read/native/`), so that the frame kept last is the one the export cuts at
//! that poll. Native frames beyond the interrupted function need frame
//! pointers (`-C force-frame-pointers=yes`). Without them, or when the
//! walk does not reach the innermost poll, a sample keeps only the
//! interrupted address above its async frames: never frames the walk
//! cannot vouch for.
//!
//! Without debug info no native frame shows a `Traced::poll` (the polls
//! are inlined). A sample then keeps the native frames above the first one
//! that runs the code of one of its async frames' bodies, found as the
//! walker finds them (the function holding an address the body recorded,
//! or a function named as the body), if every frame the walk read up to
//! it is a known function; none if the interrupted address runs a body
//! itself. So a sample taken in the innermost fn's own code shows that fn
//! on top, not the function the chain was inlined into.
//!
//! # Verification
//!
//! The polling thread can read its live chain soundly, and other threads
//! read the published stack; the two must tell the same story. Every
//! on-CPU sample compares them at the same instant, and so does every
//! [`backtrace()`](crate::backtrace) capture in debug builds or when the
//! environment variable `ASYNC_STACK_VERIFY=1` is set. A disagreement is a
//! [`Mismatch`], counted in [`Stats::mismatches`] (and, for captures, in
//! [`verify_mismatches`]).
//!
//! # Memory
//!
//! The profile keeps its tables within a budget (4 MiB by default, at most
//! 20 MiB): see [`Profile`] and [`SamplerBuilder::memory_budget`]. The
//! sampler thread's per-task cache sits beside it and is bounded by it: 184
//! bytes per task record sampled, for at most the budget's worth of
//! records (16,384 with the default budget, 3.0 MB), and 168 more for a
//! record that is the first root of a tokio task of several; past that,
//! records share slots and a task whose slot was taken is read afresh.
//! So the sampler holds about twice its budget at most, however many
//! tasks live.
//!
//! # Module map
//!
//! The path of a sample, from where it is taken to the file a user reads:
//!
//! - `thread.rs`: the sampler thread and its handle (start, the loop of
//!   ticks, stop);
//! - `wall.rs`: the sampler thread's state and the wall-clock tick (read
//!   every task, aggregate), with `tokio_tasks.rs`, the tick's tokio
//!   tasks (the roots sampled as one task), and `cache.rs`, the caches
//!   that spare a task sampled with unchanged stacks any hashing;
//! - `oncpu/` (Linux): the signal (`signal.rs`), the handler
//!   (`handler.rs`) and its buffers (`buffers.rs`), the per-thread timers
//!   and the drain (`timers.rs`), and the intake of a captured sample
//!   into the profile (`intake.rs`), through `ring.rs`, the buffers'
//!   one-producer one-consumer ring;
//! - `labels.rs`: site ids and tasks to frame and group labels, for both
//!   paths;
//! - `profile.rs`: the profile's model, interning, budget and stats;
//! - the readers' `read/native/` (below this module, beside the walker):
//!   native addresses to (module, build id, offset) (`modules.rs`) and to
//!   symbols (`elf.rs`), the sampler's one symboliser: the intake asks it
//!   where a sample's innermost poll is, and the export names frames with
//!   it;
//! - `export/`: folded stacks and SVG, pprof, JSON;
//! - [`snapshot`]: the file format of [`Profile::save`] and
//!   [`Profile::load`].
//!
//! The live-chain check ([`verify_mismatches`]) lives beneath both the
//! walker and the sampler, in the crate's `read/verify.rs`.
//!
//! Four types stand for a frame here, one per form it takes:
//!
//! - [`FrameRef`]: a frame with its text borrowed, the form a sampler
//!   hands a frame to the profile in and the profile hands it back in;
//! - `Frame` (`profile/interning.rs`): the interned form, ids into the
//!   profile's tables, so that a stack is a list of small ids that hash
//!   and compare in a few words and a snapshot stores each string once;
//! - `JsonFrame` (`export/json.rs`): a frame as the JSON export's schema
//!   spells it (tagged by `kind`, the build id in hex, a native frame's
//!   symbols), the documented output rather than a model;
//! - `CountFrame` (`export/count_pprof.rs`): the one line of a location in
//!   a profile of counted stacks (the debug endpoint's goroutine profile),
//!   which has no native or cleared frames.

mod cache;
mod export;
mod labels;
#[cfg(all(target_os = "linux", not(async_stack_loom)))]
mod oncpu;
mod profile;
// Only on-CPU sampling (Linux, not under loom) and the loom models use it.
#[cfg_attr(any(not(target_os = "linux"), async_stack_loom), allow(dead_code))]
mod ring;
pub mod snapshot;
mod thread;
mod tokio_tasks;
mod wall;

pub use crate::read::verify::{MAX_MISMATCHES, Mismatch, verify_mismatches, verify_reports};
pub use snapshot::SnapshotError;

/// The pprof writer of stacks counted once each, for the debug endpoint.
#[cfg(feature = "http")]
pub(crate) use export::count_pprof::{CountFrame, CountPprof, TaskLabels};

pub use profile::{
    DEFAULT_BUDGET, FrameRef, Grouping, MAX_BUDGET, MIN_BUDGET, Profile, SampleState, StackSample,
    Stats, Weights,
};

use std::io;
use std::time::Duration;

/// The default sampling frequency, in Hz.
pub const DEFAULT_FREQUENCY_HZ: u32 = 99;
/// The highest sampling frequency accepted, in Hz.
pub const MAX_FREQUENCY_HZ: u32 = 10_000;
/// The default per-tick task limit.
pub const DEFAULT_MAX_TASKS_PER_TICK: usize = 10_000;
/// The deepest stack a sample keeps, in frames (async and native each).
pub const MAX_DEPTH: usize = 128;

/// Configures and starts a [`Sampler`].
#[derive(Debug)]
pub struct SamplerBuilder {
    pub(crate) frequency_hz: u32,
    pub(crate) on_cpu: bool,
    pub(crate) max_tasks_per_tick: usize,
    pub(crate) budget: usize,
    pub(crate) grouping: Grouping,
    pub(crate) resume: Option<Profile>,
    pub(crate) seed: u64,
    pub(crate) fault: Option<__faults::Fault>,
}

impl Default for SamplerBuilder {
    fn default() -> Self {
        SamplerBuilder {
            frequency_hz: DEFAULT_FREQUENCY_HZ,
            on_cpu: false,
            max_tasks_per_tick: DEFAULT_MAX_TASKS_PER_TICK,
            budget: DEFAULT_BUDGET,
            grouping: Grouping::default(),
            resume: None,
            seed: 0x9e37_79b9_7f4a_7c15,
            fault: None,
        }
    }
}

impl SamplerBuilder {
    /// Samples per second, for the wall-clock ticks and for each thread's
    /// on-CPU timer (per second of that thread's CPU time). Default 99;
    /// `start` rejects 0 and anything above [`MAX_FREQUENCY_HZ`].
    pub fn frequency_hz(mut self, hz: u32) -> Self {
        self.frequency_hz = hz;
        self
    }

    /// On-CPU sampling with native frames (Linux only; `start` fails with
    /// [`io::ErrorKind::Unsupported`] elsewhere), one session per process,
    /// driven by a real-time signal (see the module docs). Default off.
    pub fn on_cpu(mut self, on: bool) -> Self {
        self.on_cpu = on;
        self
    }

    /// The most tasks sampled per wall-clock tick; above it, the sampler
    /// reservoir-samples (see the module docs). Default 10,000; `start`
    /// rejects 0.
    pub fn max_tasks_per_tick(mut self, n: usize) -> Self {
        self.max_tasks_per_tick = n;
        self
    }

    /// The profile's memory budget in bytes. Default 4 MiB; `start`
    /// rejects values below [`MIN_BUDGET`] or above [`MAX_BUDGET`].
    pub fn memory_budget(mut self, bytes: usize) -> Self {
        self.budget = bytes;
        self
    }

    /// How stacks are grouped (default: by task name).
    pub fn grouping(mut self, grouping: Grouping) -> Self {
        self.grouping = grouping;
        self
    }

    /// Continues aggregating into `profile` (for example one loaded with
    /// [`Profile::load`] after a restart): its stacks, weights and counters
    /// carry on.
    pub fn resume(mut self, profile: Profile) -> Self {
        self.resume = Some(profile);
        self
    }

    /// The seed of the reservoir sampling's random choices (fixed by
    /// default, so runs are reproducible).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Injects `fault` into this sampler: for the fault-injection tests
    /// only, not a public API.
    #[doc(hidden)]
    pub fn inject_fault(mut self, fault: __faults::Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    fn check(&self) -> io::Result<()> {
        let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        if self.frequency_hz == 0 || self.frequency_hz > MAX_FREQUENCY_HZ {
            return bad(format!(
                "sampler frequency_hz must be between 1 and {MAX_FREQUENCY_HZ}, not {}",
                self.frequency_hz
            ));
        }
        if self.max_tasks_per_tick == 0 {
            return bad("sampler max_tasks_per_tick must be at least 1".into());
        }
        if !(MIN_BUDGET..=MAX_BUDGET).contains(&self.budget) {
            return bad(format!(
                "sampler memory_budget must be between {MIN_BUDGET} and {MAX_BUDGET} bytes, not {}",
                self.budget
            ));
        }
        if self.on_cpu && !cfg!(target_os = "linux") {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "on-CPU sampling needs Linux (per-thread CPU-time timers)",
            ));
        }
        Ok(())
    }

    /// Starts the sampler thread (and the on-CPU timers).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] for a setting out of range,
    /// [`io::ErrorKind::Unsupported`] for on-CPU sampling off Linux,
    /// [`io::ErrorKind::AlreadyExists`] if on-CPU sampling is already
    /// running in this process, [`io::ErrorKind::AddrInUse`] if every
    /// real-time signal has another handler (or is blocked by the calling
    /// thread), and the OS error if the thread or the signal handler
    /// cannot be set up. A failed start leaves nothing behind: the next
    /// `start` may succeed.
    pub fn start(self) -> io::Result<Sampler> {
        self.check()?;
        thread::start(self).map(|inner| Sampler { inner })
    }
}

/// A running sampler. [`stop`](Self::stop) ends it and returns its
/// profile; dropping it stops it too, discarding the profile.
#[derive(Debug)]
pub struct Sampler {
    inner: thread::Running,
}

impl Sampler {
    /// A builder with the defaults: 99 Hz, wall-clock only, 4 MiB.
    pub fn builder() -> SamplerBuilder {
        SamplerBuilder::default()
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Stops sampling (the last tick finishes first) and returns the
    /// profile.
    pub fn stop(self) -> Profile {
        self.inner.stop()
    }

    /// The interval between wall-clock ticks.
    pub fn interval(&self) -> Duration {
        self.inner.interval
    }
}

/// Hooks for the fault-injection tests (`tests/tests/faults_oncpu_*.rs`):
/// not a public API. None of them costs anything unless a test uses it.
#[doc(hidden)]
pub mod __faults {
    /// A fault [`SamplerBuilder::inject_fault`](super::SamplerBuilder::inject_fault)
    /// injects.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Fault {
        /// The sampler thread fails to start, as if the OS refused it.
        SpawnFails,
        /// The sampler thread panics when asked to stop, before the
        /// on-CPU session is drained.
        PanicsOnStop,
    }

    /// While `true`, the sampler thread neither drains on-CPU samples nor
    /// looks for new or exited threads: a sampler thread that falls
    /// behind.
    pub fn hold_on_cpu_drain(hold: bool) {
        #[cfg(all(target_os = "linux", not(async_stack_loom)))]
        crate::sampler::oncpu::hold_drain(hold);
        #[cfg(not(all(target_os = "linux", not(async_stack_loom))))]
        let _ = hold;
    }

    /// On-CPU sample buffers allocated in this process (each holds a
    /// thread's samples; they are never freed, only reused).
    pub fn on_cpu_buffers_allocated() -> usize {
        #[cfg(all(target_os = "linux", not(async_stack_loom)))]
        return crate::sampler::oncpu::buffers_allocated();
        #[cfg(not(all(target_os = "linux", not(async_stack_loom))))]
        0
    }

    /// The calling thread's on-CPU samples not drained yet: queued in its
    /// buffer, and lost because the buffer was full.
    pub fn on_cpu_backlog() -> (usize, u64) {
        #[cfg(all(target_os = "linux", not(async_stack_loom)))]
        return crate::sampler::oncpu::backlog();
        #[cfg(not(all(target_os = "linux", not(async_stack_loom))))]
        (0, 0)
    }

    /// Whether the calling thread has an on-CPU timer now.
    pub fn on_cpu_sampled() -> bool {
        #[cfg(all(target_os = "linux", not(async_stack_loom)))]
        return crate::sampler::oncpu::sampled();
        #[cfg(not(all(target_os = "linux", not(async_stack_loom))))]
        false
    }
}
