//! The memory probe: a population of live, suspended tokio tasks, and the
//! resident memory it adds to the process.
//!
//! Shared by the `mem_probe` binary, which measures one population per
//! process, and the `memory` bench, which runs `mem_probe` and reads its
//! report ([`ProbeReport`]).
//!
//! # The population
//!
//! `tasks` tasks, each a chain of `depth` async fns (`lN -> ... -> l1`,
//! from [`crate::chain!`]) suspended at its bottom, in [`Park`](crate::Park): a plain
//! future that is `Pending` forever and never wakes anyone. The chain is
//! the same in every [`Variant`]; only the instrumentation differs:
//!
//! - [`Variant::Control`]: plain async fns, `tokio::spawn(lN())`.
//! - [`Variant::AsyncStack`]: `#[async_stack::traced_async]` on every fn,
//!   spawned with `async_stack::tokio::spawn` (which also records the spawn
//!   location and the parent task).
//! - [`Variant::AsyncBacktrace`]: `#[async_backtrace::framed]` on every fn,
//!   `tokio::spawn(lN())`: the outermost framed fn is async-backtrace's task
//!   root.
//! - [`Variant::AwaitTree`]: `tokio::spawn(registry.register(key,
//!   "root").instrument(lN()))`, await-tree's keyed task root (`key`: the
//!   task's index), and every level but `l1` awaits the level below through
//!   `.instrument_await("l(N-1)")`: `depth` tree nodes in all, one per level.
//!
//! # The measurement
//!
//! On a `current_thread` runtime, [`probe`] first spawns one task and runs
//! it until it is parked: every one-off cost (the runtime's first task, a
//! library's lazily built registry, async-stack's clock thread) is paid
//! before the first reading. It then reads the resident memory
//! (`/proc/self/statm`: resident pages × page size), spawns the `tasks`
//! tasks in batches of [`BATCH`], running the runtime after each batch until
//! all of it is parked (so tokio's run queue stays short, as for tasks
//! spawned over time), and reads the resident memory again. Every task has
//! then been polled once and is suspended; none has completed.
//!
//! ```text
//! bytes_per_task = (rss_after - rss_before) / tasks
//! ```
//!
//! The probe also reports, to explain that figure:
//!
//! - `future_bytes`: `size_of` the future handed to `tokio::spawn` (for
//!   async-stack, the `Spawned` wrapper its helper adds). tokio stores it in
//!   a task cell of header, scheduler handle, stage and trailer, aligned to
//!   128 bytes on x86_64, so the cell grows in 128-byte steps: with tokio
//!   1.54 it is `104 + max(future_bytes, 24)` bytes rounded up to a
//!   multiple of 128 (read from its source, and what the heap counters
//!   show).
//! - `heap_bytes_per_task` and `allocs_per_task`: the bytes and number of
//!   heap blocks that the population added and still holds, counted by
//!   [`CountingSystem`] when it is the global allocator (it is in
//!   `mem_probe`; elsewhere they read 0). These are the bytes asked for;
//!   the resident figure adds the allocator's headers and alignment
//!   padding, and pages touched but not handed out.
//!
//! After the second reading the population is checked (outside the
//! measurement): every task is parked, and each library sees exactly the
//! tasks spawned (the first included), each with `depth` frames or nodes.
//!
//! # Determinism
//!
//! Every variant runs in its own process, from the same binary, with the
//! same allocator (glibc's, through [`std::alloc::System`]), the same
//! runtime and the same spawning order; nothing is reserved up front for
//! any variant. Transparent huge pages are `madvise`-only on the machine
//! the figures in BENCHMARKS.md come from, so the heap grows in 4 KiB pages.

use std::future::Future;

use serde::{Deserialize, Serialize};
use tokio::runtime::{Builder, Runtime};

use crate::names;

mod heap;
mod table;
mod variants;

use crate::parked;
pub use heap::CountingSystem;
pub use table::{
    Detail, Figures, TARGET_DEPTH, TARGET_RATIO_VS_ASYNC_BACKTRACE, added, table, target_ratio,
};
use variants::{AsyncBacktrace, AsyncStack, AwaitTree, Control, Instrumentation};
pub use variants::{async_backtrace_chain, async_stack_chain, await_tree_chain, control_chain};

/// Tasks the probe spawns and measures by default.
pub const TASKS: usize = 100_000;

/// The chain depths the `memory` bench measures (the chains below define
/// every depth up to 16; [`probe`] accepts these).
pub const DEPTHS: [usize; 2] = [3, 16];

/// Tasks spawned before the runtime runs them all to [`Park`](crate::Park).
pub const BATCH: usize = 1024;

/// A way of instrumenting the population.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// Plain async fns: the baseline.
    Control,
    /// `#[async_stack::traced_async]`, `async_stack::tokio::spawn`.
    AsyncStack,
    /// `#[async_backtrace::framed]`.
    AsyncBacktrace,
    /// await-tree's registry root and `instrument_await` per level.
    AwaitTree,
}

impl Variant {
    /// Every variant, baseline first.
    pub const ALL: [Variant; 4] = [
        Variant::Control,
        Variant::AsyncStack,
        Variant::AsyncBacktrace,
        Variant::AwaitTree,
    ];

    /// The name on `mem_probe`'s command line, in its report and in the
    /// bench ids.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Control => names::MEMORY_CONTROL,
            Variant::AsyncStack => names::ASYNC_STACK,
            Variant::AsyncBacktrace => names::ASYNC_BACKTRACE,
            Variant::AwaitTree => names::AWAIT_TREE,
        }
    }

    /// The variant called `name`, if any.
    pub fn from_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// What `mem_probe` prints, one JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// [`Variant::name`].
    pub variant: String,
    /// Instrumented levels per task.
    pub depth: usize,
    /// Tasks measured (the one spawned before the first reading excluded).
    pub tasks: usize,
    /// Resident bytes before spawning the measured tasks.
    pub rss_before: u64,
    /// Resident bytes with every measured task parked.
    pub rss_after: u64,
    /// `(rss_after - rss_before) / tasks`.
    pub bytes_per_task: f64,
    /// `size_of` the future handed to `tokio::spawn`.
    pub future_bytes: usize,
    /// Heap bytes the population added and holds, per task (0 unless
    /// [`CountingSystem`] is the global allocator).
    pub heap_bytes_per_task: f64,
    /// Heap blocks the population added and holds, per task (likewise).
    pub allocs_per_task: f64,
}

impl ProbeReport {
    /// Runs `mem_probe` (the binary at `exe`) for `tasks` tasks of
    /// `variant` at `depth` in a new process, and reads its report.
    ///
    /// Errors: the process cannot start, fails (its stderr is in the
    /// message), prints no report, or reports another population.
    pub fn run(
        exe: &std::path::Path,
        variant: Variant,
        depth: usize,
        tasks: usize,
    ) -> Result<ProbeReport, String> {
        let what = format!("mem_probe {} {depth} {tasks}", variant.name());
        let output = std::process::Command::new(exe)
            .args([variant.name(), &depth.to_string(), &tasks.to_string()])
            .output()
            .map_err(|e| format!("{what}: cannot run {}: {e}", exe.display()))?;
        if !output.status.success() {
            return Err(format!(
                "{what} failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let report: ProbeReport = serde_json::from_slice(&output.stdout)
            .map_err(|e| format!("{what} printed no report: {e}"))?;
        if (report.variant.as_str(), report.depth, report.tasks) != (variant.name(), depth, tasks) {
            return Err(format!("{what} reported another population: {report:?}"));
        }
        Ok(report)
    }
}

/// Spawns and measures a population; the runtime and its tasks are
/// returned alive (dropping 100,000 tasks takes time a probe process that
/// exits next need not spend).
///
/// Call it once per process: the checks count every task the process has
/// (and every task the libraries' registries hold).
///
/// Errors: a depth outside [`DEPTHS`], a runtime that cannot be built, or a
/// population that fails its check.
pub fn probe(
    variant: Variant,
    depth: usize,
    tasks: usize,
) -> Result<(ProbeReport, Runtime), String> {
    /// Runs `$instrumentation` on the chain of `$chain` of the given depth.
    macro_rules! at_depth {
        ($chain:ident, $instrumentation:expr) => {
            match depth {
                3 => measure(variant, depth, tasks, $instrumentation, $chain::l3),
                16 => measure(variant, depth, tasks, $instrumentation, $chain::l16),
                _ => Err(format!("depth {depth}: expected one of {DEPTHS:?}")),
            }
        };
    }
    match variant {
        Variant::Control => at_depth!(control_chain, Control),
        Variant::AsyncStack => at_depth!(async_stack_chain, AsyncStack),
        Variant::AsyncBacktrace => at_depth!(async_backtrace_chain, AsyncBacktrace),
        Variant::AwaitTree => at_depth!(
            await_tree_chain,
            AwaitTree(await_tree::Registry::new(await_tree::Config::default()))
        ),
    }
}

/// The measurement of the module docs, for one variant and chain.
fn measure<I: Instrumentation, F>(
    variant: Variant,
    depth: usize,
    tasks: usize,
    instrumentation: I,
    root: fn() -> F,
) -> Result<(ProbeReport, Runtime), String>
where
    F: Future<Output = ()> + Send + 'static,
{
    if tasks == 0 {
        return Err("tasks: expected at least 1".to_owned());
    }
    let rt = Builder::new_current_thread()
        .build()
        .map_err(|e| format!("building the tokio runtime: {e}"))?;
    populate(&rt, &instrumentation, root, 0..1);
    let rss_before = resident_bytes()?;
    let heap_before = heap::live();
    let future_bytes = populate(&rt, &instrumentation, root, 1..tasks + 1);
    let heap_after = heap::live();
    let rss_after = resident_bytes()?;

    let live = tasks + 1;
    if parked() != live {
        return Err(format!("{} tasks parked, expected {live}", parked()));
    }
    instrumentation.check(depth, live)?;

    let per_task = |delta: f64| delta / tasks as f64;
    let (heap_bytes, heap_blocks) = heap_after.since(heap_before);
    Ok((
        ProbeReport {
            variant: variant.name().to_owned(),
            depth,
            tasks,
            rss_before,
            rss_after,
            bytes_per_task: per_task(rss_after as f64 - rss_before as f64),
            future_bytes,
            heap_bytes_per_task: per_task(heap_bytes),
            allocs_per_task: per_task(heap_blocks),
        },
        rt,
    ))
}

/// Spawns one task per key in batches of [`BATCH`], each batch run until
/// parked; returns `size_of` the future handed to tokio.
fn populate<I: Instrumentation, F>(
    rt: &Runtime,
    instrumentation: &I,
    root: fn() -> F,
    keys: std::ops::Range<usize>,
) -> usize
where
    F: Future<Output = ()> + Send + 'static,
{
    rt.block_on(async {
        let mut future_bytes = 0;
        let mut keys = keys.peekable();
        while keys.peek().is_some() {
            let target = parked();
            let target = target
                + keys
                    .by_ref()
                    .take(BATCH)
                    .map(|key| {
                        future_bytes = instrumentation.spawn(key, root());
                    })
                    .count();
            while parked() < target {
                tokio::task::yield_now().await;
            }
        }
        future_bytes
    })
}

/// The process's resident memory: `/proc/self/statm`'s resident pages ×
/// the page size.
pub fn resident_bytes() -> Result<u64, String> {
    let statm = std::fs::read_to_string("/proc/self/statm")
        .map_err(|e| format!("reading /proc/self/statm: {e}"))?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("/proc/self/statm: no resident pages in {statm:?}"))?;
    // SAFETY: `sysconf` only reads a configuration value.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page_size = u64::try_from(page_size).map_err(|_| "sysconf(_SC_PAGESIZE) failed")?;
    Ok(pages * page_size)
}
