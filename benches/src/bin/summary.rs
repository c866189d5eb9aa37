//! `summary`: prints the tables of BENCHMARKS.md from criterion's results.
//!
//! Reads every `<criterion dir>/**/new/{benchmark,estimates}.json` left by
//! `cargo bench -p benches` and prints markdown: the `poll_depth` per-level
//! per-poll table with the async-stack / async-backtrace and
//! async-stack / await-tree ratios and the targets, then the `root_poll`,
//! `root`, `capture`, `spawn`, `dump`, `dump_cold` and `memory` tables, and
//! last a table of every target with its verdict. Each time is criterion's
//! headline estimate (the
//! regression slope when criterion has one, else the mean), the number
//! printed after `time:` by `cargo bench`; for `dump_cold_alloc` that
//! number is bytes allocated, and for `memory` resident bytes per live
//! task, not a time (see `benches/dump_cold.rs` and `benches/memory.rs`).
//! The `sampler` tables come from its four groups: CPU time per tick,
//! per workload iteration, per signal handled, and per snapshot operation
//! (whose byte count is the group's throughput, in `benchmark.json`); see
//! `benches/sampler.rs`.
//!
//! ```text
//! cargo run -p benches --bin summary [-- CRITERION_DIR]
//! ```
//!
//! `CRITERION_DIR` defaults to `$CRITERION_HOME`, else the workspace's
//! `target/criterion`. A benchmark that has not been run shows as `n/a`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use benches::calls::{CALLS_PER_POLL, WIDE};
use benches::memory::{self, Figures, Variant};
use benches::root_poll::ROOT_POLL_DEPTHS;
use benches::{
    DEPTHS, DUMP_DEPTH, DUMP_TASKS, POLLS_PER_FUTURE, SAMPLER_APP_HZ, SAMPLER_APP_TASKS,
    SAMPLER_TICK_HZ, SAMPLER_TICK_TASKS, SPAWN_POLLS, SPAWN_TASKS, names,
};
use serde_json::Value;

/// Per-level cost the design aims for at depth 8, in ns per level per poll.
const TARGET_NS_PER_LEVEL: f64 = 2.0;
/// Largest acceptable async-stack / async-backtrace per-level ratio.
const TARGET_RATIO_VS_ASYNC_BACKTRACE: f64 = 0.5;
/// The per-level cost aimed at next, at depth 8, ns (not a target yet).
const AIM_NS_PER_LEVEL: f64 = 1.0;
/// Largest acceptable async-stack / async-backtrace ratio of what each adds
/// to a root poll at depth 8 (`root_poll`).
const TARGET_ROOT_POLL_RATIO: f64 = 0.5;
/// The depth of the `root_poll` target.
const TARGET_ROOT_POLL_DEPTH: u32 = 8;
/// Largest acceptable async-stack / async-backtrace ratio of what each adds
/// to a task's life (`root`, one poll) and to a spawn + completion through
/// the helper (`spawn`, `current_thread`, one poll).
const TARGET_RATIO_TASK_LIFE: f64 = 1.0;
/// Largest acceptable cost a task root adds to a spawn + completion, ns.
const TARGET_SPAWN_NS: f64 = 100.0;
/// The polls of the spawned task the spawn target is measured with.
const TARGET_SPAWN_POLLS: u32 = 1;
/// Largest acceptable time for `dump().to_string()` of the `dump` bench's
/// tasks, ms.
const TARGET_DUMP_MS: f64 = 5.0;
/// `dump().to_json()` of the same tasks (issue 20).
const TARGET_DUMP_JSON_MS: f64 = 10.0;
/// Largest acceptable time for the first streamed dump of the same tasks
/// in a fresh process (`dump_cold`), ms.
const TARGET_COLD_DUMP_MS: f64 = 5.0;
/// Most bytes the first streamed dump of those tasks may allocate, MB.
const TARGET_COLD_DUMP_MB: f64 = 2.0;
/// Most sampler CPU time per live task per wall-clock tick, ns.
const TARGET_SAMPLER_TICK_NS: f64 = 50.0;
/// Most application throughput a sampler at 99 Hz may take with 1,000
/// tasks, percent (extra process CPU time per unit of work).
const TARGET_SAMPLER_LOSS_PCT: f64 = 1.0;

/// `(group, function, parameter)` -> criterion's typical time in ns.
type Results = BTreeMap<(String, String, String), Estimate>;

/// Criterion's typical estimate and its 95% confidence interval, in ns,
/// and the benchmark's throughput in bytes per iteration, if it has one.
#[derive(Clone, Copy, Debug)]
struct Estimate {
    point: f64,
    lower: f64,
    upper: f64,
    bytes: Option<u64>,
}

fn main() -> ExitCode {
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("CRITERION_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion")),
    };
    let mut results = Results::new();
    if let Err(e) = collect(&dir, &mut results) {
        eprintln!("summary: reading {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    if results.is_empty() {
        eprintln!(
            "summary: no criterion results under {}; run `cargo bench -p benches` first",
            dir.display()
        );
        return ExitCode::FAILURE;
    }
    let r = Lookup(&results);
    poll_depth(&r);
    root_poll(&r);
    calls(&r);
    root(&r);
    root_tokio(&r);
    capture(&r);
    spawn(&r);
    dump(&r);
    dump_cold(&r);
    memory(&r);
    sampler(&r);
    wake(&r);
    targets(&r);
    ExitCode::SUCCESS
}

/// Walks `dir` for `new/` result directories.
fn collect(dir: &Path, results: &mut Results) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") {
            if let Some((key, estimate)) = read_result(&path) {
                results.insert(key, estimate);
            }
        } else {
            collect(&path, results)?;
        }
    }
    Ok(())
}

/// Reads one `new/` directory: its id from `benchmark.json` and the typical
/// estimate from `estimates.json`.
fn read_result(new: &Path) -> Option<((String, String, String), Estimate)> {
    let read = |name: &str| -> Option<Value> {
        let text = std::fs::read_to_string(new.join(name)).ok()?;
        serde_json::from_str(&text).ok()
    };
    let id = read("benchmark.json")?;
    let estimates = read("estimates.json")?;
    let field = |name: &str| id[name].as_str().unwrap_or("").to_owned();
    let typical = match &estimates["slope"] {
        Value::Null => &estimates["mean"],
        slope => slope,
    };
    let ci = &typical["confidence_interval"];
    let estimate = Estimate {
        point: typical["point_estimate"].as_f64()?,
        lower: ci["lower_bound"].as_f64()?,
        upper: ci["upper_bound"].as_f64()?,
        bytes: id["throughput"]["Bytes"].as_u64(),
    };
    Some((
        (field("group_id"), field("function_id"), field("value_str")),
        estimate,
    ))
}

struct Lookup<'a>(&'a Results);

impl Lookup<'_> {
    /// The point estimate, in ns.
    fn get(&self, group: &str, function: &str, value: impl ToString) -> Option<f64> {
        Some(self.estimate(group, function, value)?.point)
    }

    fn estimate(&self, group: &str, function: &str, value: impl ToString) -> Option<Estimate> {
        let key = (group.to_owned(), function.to_owned(), value.to_string());
        self.0.get(&key).copied()
    }

    /// `point (lower–upper)` divided by `scale`, or `n/a`.
    fn with_ci(
        &self,
        group: &str,
        function: &str,
        value: impl ToString,
        scale: f64,
        decimals: usize,
    ) -> String {
        match self.estimate(group, function, value) {
            Some(e) => format!(
                "{:.decimals$} ({:.decimals$}–{:.decimals$})",
                e.point / scale,
                e.lower / scale,
                e.upper / scale
            ),
            None => "n/a".to_owned(),
        }
    }
}

/// Formats an optional number with `decimals` decimals, or `n/a`.
fn fmt(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

/// Every `poll_depth` variant but the baseline, in column order: the
/// control first, then async-stack's two forms, then the peers.
const INSTRUMENTED: [&str; 5] = [
    names::CONTROL,
    names::ASYNC_STACK,
    names::ASYNC_STACK_TRACED_EXT,
    names::ASYNC_BACKTRACE,
    names::AWAIT_TREE,
];

fn poll_depth(r: &Lookup<'_>) {
    let g = names::POLL_DEPTH;
    let polls = f64::from(POLLS_PER_FUTURE);
    println!("## poll_depth\n");
    println!("Time per future ({POLLS_PER_FUTURE} polls), µs, with criterion's 95% interval:\n");
    let all: Vec<&str> = std::iter::once(names::UNTRACED)
        .chain(INSTRUMENTED)
        .collect();
    println!("| depth | {} |", all.join(" | "));
    println!("|---:|{}", "---:|".repeat(all.len()));
    for depth in DEPTHS {
        let cells: Vec<String> = all.iter().map(|v| r.with_ci(g, v, depth, 1e3, 2)).collect();
        println!("| {depth} | {} |", cells.join(" | "));
    }

    // The same difference between depth 8 and 32: the root's costs cancel.
    let marginal = |variant: &str| {
        let extra = |d: u32| Some(r.get(g, variant, d)? - r.get(g, names::UNTRACED, d)?);
        Some((extra(32)? - extra(8)?) / (24.0 * polls))
    };
    println!(
        "\nAdded ns per level per poll, `(variant - untraced) / (depth * {POLLS_PER_FUTURE})`; \
         the last row is the marginal level, `Δ(32 - 8) / (24 * {POLLS_PER_FUTURE})`:\n"
    );
    let (ours, ab, at) = (
        names::ASYNC_STACK,
        names::ASYNC_BACKTRACE,
        names::AWAIT_TREE,
    );
    println!(
        "| depth | {} | {ours} / {ab} | {ours} / {at} |",
        INSTRUMENTED.join(" | ")
    );
    println!("|---:|{}---:|---:|", "---:|".repeat(INSTRUMENTED.len()));
    let row = |label: String, cost: &dyn Fn(&str) -> Option<f64>| {
        let cells: Vec<String> = INSTRUMENTED.iter().map(|v| fmt(cost(v), 2)).collect();
        println!(
            "| {label} | {} | {} | {} |",
            cells.join(" | "),
            fmt(ratio(cost(ours), cost(ab)), 2),
            fmt(ratio(cost(ours), cost(at)), 2)
        );
    };
    for depth in DEPTHS {
        row(depth.to_string(), &|v| per_level(r, v, depth));
    }
    row("marginal 8→32".to_owned(), &marginal);

    println!();
    for target in &poll_depth_targets(r)[..] {
        println!("- {}", target.line());
    }
    println!(
        "- next aim (not a target): {AIM_NS_PER_LEVEL} ns per level per poll at depth 8, \
         measured {}",
        fmt(per_level(r, names::ASYNC_STACK, 8), 2)
    );
    println!();
}

/// The `root_poll` variants, baseline first.
const ROOT_POLL_VARIANTS: [&str; 4] = [
    names::UNTRACED,
    names::ASYNC_STACK,
    names::ASYNC_BACKTRACE,
    names::AWAIT_TREE,
];

/// What `variant` adds to a root poll at `depth` in `root_poll`, ns.
fn root_poll_added(r: &Lookup<'_>, variant: &str, depth: u32) -> Option<f64> {
    let g = names::ROOT_POLL;
    Some(r.get(g, variant, depth)? - r.get(g, names::UNTRACED, depth)?)
}

fn root_poll(r: &Lookup<'_>) {
    let g = names::ROOT_POLL;
    println!("## root_poll\n");
    println!(
        "One poll of a registered task root, boxed levels, leaf `Pending`, ns per root poll \
         (95% interval); added = variant − untraced:\n"
    );
    println!("| depth | variant | ns per root poll | added ns | × untraced |");
    println!("|---:|---|---:|---:|---:|");
    for depth in ROOT_POLL_DEPTHS {
        let base = r.get(g, names::UNTRACED, depth);
        for variant in ROOT_POLL_VARIANTS {
            println!(
                "| {depth} | {variant} | {} | {} | {} |",
                r.with_ci(g, variant, depth, 1.0, 2),
                fmt(root_poll_added(r, variant, depth), 2),
                fmt(ratio(r.get(g, variant, depth), base), 2)
            );
        }
    }
    let (ours, ab, at) = (
        names::ASYNC_STACK,
        names::ASYNC_BACKTRACE,
        names::AWAIT_TREE,
    );
    println!("\n| depth | {ours} / {ab} (added) | {ours} / {at} (added) |");
    println!("|---:|---:|---:|");
    for depth in ROOT_POLL_DEPTHS {
        let added = |v: &str| root_poll_added(r, v, depth);
        println!(
            "| {depth} | {} | {} |",
            fmt(ratio(added(ours), added(ab)), 2),
            fmt(ratio(added(ours), added(at)), 2)
        );
    }
    println!();
    println!("- {}", root_poll_target(r).line());
    println!();
}

fn root_poll_target(r: &Lookup<'_>) -> Target {
    let d = TARGET_ROOT_POLL_DEPTH;
    Target::at_most(
        format!(
            "≤ {TARGET_ROOT_POLL_RATIO} × async-backtrace's added cost per root poll at depth {d}"
        ),
        ratio(
            root_poll_added(r, names::ASYNC_STACK, d),
            root_poll_added(r, names::ASYNC_BACKTRACE, d),
        ),
        TARGET_ROOT_POLL_RATIO,
        "×",
        2,
    )
}

/// What `variant` adds to one call in group `g` (`n` calls per poll), ns.
fn call_added(r: &Lookup<'_>, (g, n): (&str, u64), variant: &str) -> Option<f64> {
    Some((r.get(g, variant, n)? - r.get(g, names::UNTRACED, n)?) / n as f64)
}

fn calls(r: &Lookup<'_>) {
    let n = CALLS_PER_POLL;
    calls_table(
        r,
        (names::CALLS, n),
        &format!(
            "## calls\n\nOne poll of a task that makes {n} calls of an instrumented fn that \
             completes at once"
        ),
    );
    let n = WIDE;
    calls_table(
        r,
        (names::CALLS_WIDE, n),
        &format!(
            "## calls_wide\n\nOne poll of a task that awaits {n} calls at once, each `Pending` \
             once: one round completes and the next starts"
        ),
    );
}

/// The table of a `calls` group: `title` then ns per poll and per call.
fn calls_table(r: &Lookup<'_>, (g, n): (&str, u64), title: &str) {
    println!("{title}, ns per poll (95% interval); added per call = (variant − untraced) / {n}:\n");
    println!("| variant | ns per poll | added ns per call | added / async-backtrace's |");
    println!("|---|---:|---:|---:|");
    for variant in ROOT_POLL_VARIANTS {
        println!(
            "| {variant} | {} | {} | {} |",
            r.with_ci(g, variant, n, 1.0, 2),
            fmt(call_added(r, (g, n), variant), 2),
            fmt(
                ratio(
                    call_added(r, (g, n), variant),
                    call_added(r, (g, n), names::ASYNC_BACKTRACE)
                ),
                2
            )
        );
    }
    println!();
}

/// What `variant` adds to a task's life in `root` (`polls` polls), ns.
fn root_added(r: &Lookup<'_>, variant: &str, polls: u32) -> Option<f64> {
    let g = names::ROOT;
    Some(r.get(g, variant, polls)? - r.get(g, names::UNTRACED, polls)?)
}

fn root_target(r: &Lookup<'_>) -> Target {
    Target::at_most(
        format!(
            "≤ {TARGET_RATIO_TASK_LIFE} × async-backtrace's added cost of a task root created, \
             polled once and dropped (`root`)"
        ),
        ratio(
            root_added(r, names::ASYNC_STACK, 1),
            root_added(r, names::ASYNC_BACKTRACE, 1),
        ),
        TARGET_RATIO_TASK_LIFE,
        "×",
        2,
    )
}

/// The spawn helper against async-backtrace in the `spawn` group
/// `group` (one poll), whose shape `shape` describes: in batches, or each
/// handle awaited at once, so that every join waits (and the helper
/// records the wait).
fn spawn_helper_target(r: &Lookup<'_>, group: &str, shape: &str) -> Target {
    Target::at_most(
        format!(
            "≤ {TARGET_RATIO_TASK_LIFE} × async-backtrace's added cost per spawn+completion \
             through the spawn helper ({shape}current_thread, 1 poll)"
        ),
        ratio(
            spawn_added(r, group, names::ASYNC_STACK_SPAWN_HELPER, 1),
            spawn_added(r, group, names::ASYNC_BACKTRACE, 1),
        ),
        TARGET_RATIO_TASK_LIFE,
        "×",
        2,
    )
}

/// Both shapes' [`spawn_helper_target`].
fn spawn_helper_targets(r: &Lookup<'_>) -> [Target; 2] {
    [
        spawn_helper_target(r, names::SPAWN_CURRENT_THREAD, ""),
        spawn_helper_target(
            r,
            names::SPAWN_JOIN_CURRENT_THREAD,
            "each handle awaited at once, ",
        ),
    ]
}

/// `(variant - untraced) / (depth * polls)` in `poll_depth`, ns.
fn per_level(r: &Lookup<'_>, variant: &str, depth: u32) -> Option<f64> {
    let g = names::POLL_DEPTH;
    let extra = r.get(g, variant, depth)? - r.get(g, names::UNTRACED, depth)?;
    Some(extra / (f64::from(depth) * f64::from(POLLS_PER_FUTURE)))
}

/// One target: what it asks, the measured value, and whether it is met.
struct Target {
    /// What is asked, e.g. "≤ 2 ns/level/poll at depth 8".
    goal: String,
    /// The measured value, formatted, or `None` when not run.
    measured: Option<String>,
    /// `measured / limit` (≤ 1 means met).
    of_limit: Option<f64>,
    /// How much the value exceeds the limit, formatted, when it does.
    excess: Option<String>,
}

impl Target {
    /// A target on a value that must not exceed `limit`.
    fn at_most(
        goal: String,
        value: Option<f64>,
        limit: f64,
        unit: &str,
        decimals: usize,
    ) -> Target {
        Target {
            goal,
            measured: value.map(|v| format!("{v:.decimals$}{unit}")),
            of_limit: value.map(|v| v / limit),
            excess: value
                .filter(|&v| v > limit)
                .map(|v| format!("{:.decimals$}{unit}", v - limit)),
        }
    }

    fn verdict(&self) -> String {
        match (self.of_limit, &self.excess) {
            (None, _) => "n/a (not run)".to_owned(),
            (Some(q), None) => format!("met ({q:.2}× the limit)"),
            (Some(q), Some(excess)) => format!("**missed** by {excess} ({q:.2}× the limit)"),
        }
    }

    fn line(&self) -> String {
        format!(
            "target {}: {}, {}",
            self.goal,
            self.measured.as_deref().unwrap_or("n/a"),
            self.verdict()
        )
    }
}

fn poll_depth_targets(r: &Lookup<'_>) -> [Target; 2] {
    let ours = per_level(r, names::ASYNC_STACK, 8);
    let theirs = per_level(r, names::ASYNC_BACKTRACE, 8);
    [
        Target::at_most(
            format!("≤ {TARGET_NS_PER_LEVEL} ns per level per poll at depth 8"),
            ours,
            TARGET_NS_PER_LEVEL,
            " ns",
            2,
        ),
        Target::at_most(
            format!("≤ {TARGET_RATIO_VS_ASYNC_BACKTRACE} × async-backtrace per level at depth 8"),
            ratio(ours, theirs),
            TARGET_RATIO_VS_ASYNC_BACKTRACE,
            "×",
            2,
        ),
    ]
}

fn root(r: &Lookup<'_>) {
    let g = names::ROOT;
    println!("## root\n");
    println!("Create + poll to completion + drop of a one-level task, ns per task:\n");
    println!("| polls | variant | ns per task (95% interval) | extra vs untraced | × untraced |");
    println!("|---:|---|---:|---:|---:|");
    for polls in [1, 2] {
        let base = r.get(g, names::UNTRACED, polls);
        for variant in [
            names::UNTRACED,
            names::ASYNC_STACK,
            names::ASYNC_STACK_TRACED_EXT,
            names::ASYNC_BACKTRACE,
            names::AWAIT_TREE,
        ] {
            let t = r.get(g, variant, polls);
            let extra = root_added(r, variant, polls);
            println!(
                "| {polls} | {variant} | {} | {} | {} |",
                r.with_ci(g, variant, polls, 1.0, 1),
                fmt(extra, 1),
                fmt(ratio(t, base), 1)
            );
        }
    }
    println!();
    println!("- {}", root_target(r).line());
    println!();
}

/// What `variant` adds to a task's life inside a tokio task
/// (`root_tokio`, `polls` polls), ns.
fn root_tokio_added(r: &Lookup<'_>, variant: &str, polls: u32) -> Option<f64> {
    let g = names::ROOT_TOKIO;
    Some(r.get(g, variant, polls)? - r.get(g, names::UNTRACED, polls)?)
}

/// What filing roots under their tokio task adds, ns: per root (its first
/// poll) with `polls` 1, and per later poll (the slope from 1 to 2 polls):
/// async-stack's extra inside a tokio task less its extra outside.
fn tokio_filing(r: &Lookup<'_>) -> (Option<f64>, Option<f64>) {
    let per_root = (|| {
        Some(root_tokio_added(r, names::ASYNC_STACK, 1)? - root_added(r, names::ASYNC_STACK, 1)?)
    })();
    let per_poll = (|| {
        let inside = root_tokio_added(r, names::ASYNC_STACK, 2)?
            - root_tokio_added(r, names::ASYNC_STACK, 1)?;
        let outside = root_added(r, names::ASYNC_STACK, 2)? - root_added(r, names::ASYNC_STACK, 1)?;
        Some(inside - outside)
    })();
    (per_root, per_poll)
}

fn tokio_filing_target(r: &Lookup<'_>) -> Target {
    Target::at_most(
        "≤ 2 ns added per root poll by filing roots under their tokio task (`root_tokio` \
         less `root`, slope from 1 to 2 polls)"
            .to_owned(),
        tokio_filing(r).1,
        2.0,
        " ns",
        2,
    )
}

fn root_tokio(r: &Lookup<'_>) {
    let g = names::ROOT_TOKIO;
    println!(
        "## root inside a tokio task
"
    );
    println!("The same tasks inside one task of a current_thread runtime, ns per task:\n");
    println!("| polls | variant | ns per task (95% interval) | extra vs untraced | × untraced |");
    println!("|---:|---|---:|---:|---:|");
    for polls in [1, 2] {
        let base = r.get(g, names::UNTRACED, polls);
        for variant in [names::UNTRACED, names::ASYNC_STACK, names::ASYNC_BACKTRACE] {
            let t = r.get(g, variant, polls);
            println!(
                "| {polls} | {variant} | {} | {} | {} |",
                r.with_ci(g, variant, polls, 1.0, 1),
                fmt(root_tokio_added(r, variant, polls), 1),
                fmt(ratio(t, base), 1)
            );
        }
    }
    let (per_root, _) = tokio_filing(r);
    println!();
    println!(
        "- filing a root under its tokio task, on its first poll: {} ns per root",
        fmt(per_root, 1)
    );
    println!("- {}", tokio_filing_target(r).line());
    println!();
}

fn capture(r: &Lookup<'_>) {
    let g = names::CAPTURE;
    let get = |f: &str| r.get(g, f, "");
    println!("## capture\n");
    println!("Inside a depth-8 traced chain, µs per backtrace (95% interval):\n");
    println!("| variant | µs | peer | peer µs | × peer |");
    println!("|---|---:|---|---:|---:|");
    for (ours, peer) in [
        (names::CAPTURE_ONLY, names::STD_CAPTURE_ONLY),
        (names::CAPTURE_RESOLVE_WARM, names::STD_CAPTURE_RESOLVE),
    ] {
        let (t, p) = (get(ours), get(peer));
        println!(
            "| {ours} | {} | {peer} | {} | {} |",
            r.with_ci(g, ours, "", 1e3, 2),
            r.with_ci(g, peer, "", 1e3, 2),
            fmt(ratio(t, p), 3)
        );
    }
    println!();
}

/// The `spawn` groups, how to name them in tables, and their polls.
const SPAWN_GROUPS: [(&str, &str, &[u32]); 3] = [
    (names::SPAWN_CURRENT_THREAD, "current_thread", &SPAWN_POLLS),
    (
        names::SPAWN_MULTI_THREAD,
        "multi_thread (2 workers)",
        &SPAWN_POLLS,
    ),
    (
        names::SPAWN_JOIN_CURRENT_THREAD,
        "current_thread, each awaited at once",
        &[1],
    ),
];

/// Every `spawn` variant, baseline first.
const SPAWN_VARIANTS: [&str; 5] = [
    names::UNTRACED,
    names::ASYNC_STACK,
    names::ASYNC_STACK_SPAWN_HELPER,
    names::ASYNC_BACKTRACE,
    names::AWAIT_TREE,
];

/// ns per task of a `spawn` variant: criterion's time per batch / batch.
fn spawn_ns(r: &Lookup<'_>, group: &str, variant: &str, polls: u32) -> Option<f64> {
    Some(r.get(group, variant, polls)? / f64::from(SPAWN_TASKS))
}

/// Added ns per task of a `spawn` variant against `untraced`.
fn spawn_added(r: &Lookup<'_>, group: &str, variant: &str, polls: u32) -> Option<f64> {
    Some(spawn_ns(r, group, variant, polls)? - spawn_ns(r, group, names::UNTRACED, polls)?)
}

fn spawn(r: &Lookup<'_>) {
    println!("## spawn\n");
    println!(
        "Spawn + run to completion + join, {SPAWN_TASKS} tasks per iteration, ns per task \
         (95% interval); added = variant − untraced:\n"
    );
    println!("| runtime | polls | variant | ns per task | added ns | × untraced |");
    println!("|---|---:|---|---:|---:|---:|");
    for (group, runtime, polls_list) in SPAWN_GROUPS {
        for &polls in polls_list {
            let base = spawn_ns(r, group, names::UNTRACED, polls);
            for variant in SPAWN_VARIANTS {
                let t = spawn_ns(r, group, variant, polls);
                println!(
                    "| {runtime} | {polls} | {variant} | {} | {} | {} |",
                    r.with_ci(group, variant, polls, f64::from(SPAWN_TASKS), 1),
                    fmt(spawn_added(r, group, variant, polls), 1),
                    fmt(ratio(t, base), 2)
                );
            }
        }
    }
    println!(
        "\nAdded ns per task, async-stack (`tokio::spawn(traced())`) against the peers' added \
         ns:\n"
    );
    println!(
        "| runtime | polls | async-stack | async-backtrace | await-tree | async-stack / async-backtrace | async-stack / await-tree |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (group, runtime, polls_list) in SPAWN_GROUPS {
        for &polls in polls_list {
            let added = |v: &str| spawn_added(r, group, v, polls);
            let (ours, ab, at) = (
                added(names::ASYNC_STACK),
                added(names::ASYNC_BACKTRACE),
                added(names::AWAIT_TREE),
            );
            println!(
                "| {runtime} | {polls} | {} | {} | {} | {} | {} |",
                fmt(ours, 1),
                fmt(ab, 1),
                fmt(at, 1),
                fmt(ratio(ours, ab), 2),
                fmt(ratio(ours, at), 2)
            );
        }
    }
    println!();
    for target in spawn_targets(r, names::SPAWN_CURRENT_THREAD, "current_thread") {
        println!("- {}", target.line());
    }
    for target in spawn_helper_targets(r) {
        println!("- {}", target.line());
    }
    println!(
        "- informational only (process CPU time, which also counts the workers' searching and \
         parking, varies more between runs than these differences):"
    );
    for target in spawn_targets(r, names::SPAWN_MULTI_THREAD, "multi_thread") {
        println!("  - {}", target.line());
    }
    println!();
}

/// The spawn targets on one runtime. Verdicts are `current_thread`'s: on
/// `multi_thread` the process CPU time also counts the workers' searching
/// and parking, which varies more between runs than the instrumentation
/// costs, so its lines are informational.
///
/// The target is a spawn plus completion, a task done in one poll; the
/// rows with more polls (a `Pending` and a wake between them) are in the
/// table above, not targets.
fn spawn_targets(r: &Lookup<'_>, group: &str, runtime: &str) -> Vec<Target> {
    [names::ASYNC_STACK, names::ASYNC_STACK_SPAWN_HELPER]
        .into_iter()
        .map(|variant| {
            Target::at_most(
                format!(
                    "≤ {TARGET_SPAWN_NS} ns added per spawn+completion \
                     ({variant}, {runtime}, {TARGET_SPAWN_POLLS} poll)"
                ),
                spawn_added(r, group, variant, TARGET_SPAWN_POLLS),
                TARGET_SPAWN_NS,
                " ns",
                1,
            )
        })
        .collect()
}

/// Every `dump` variant, async-stack first.
const DUMP_VARIANTS: [&str; 9] = [
    names::DUMP_SNAPSHOT,
    names::DUMP_TEXT,
    names::DUMP_WRITE_TEXT,
    names::DUMP_JSON,
    names::DUMP_TO_JSON,
    names::DUMP_WRITE_JSON,
    names::AB_TASKDUMP,
    names::AT_COLLECT,
    names::AT_COLLECT_TEXT,
];

fn dump(r: &Lookup<'_>) {
    let g = names::DUMP;
    let get = |v: &str| r.get(g, v, "");
    println!("## dump\n");
    println!(
        "One dump of {DUMP_TASKS} live, suspended tasks, {DUMP_DEPTH} frames each; ms per dump \
         (95% interval). Ratios against async-stack's text dump:\n"
    );
    println!("| variant | ms per dump | µs per task | × async-stack text |");
    println!("|---|---:|---:|---:|");
    let ours = get(names::DUMP_TEXT);
    for variant in DUMP_VARIANTS {
        let t = get(variant);
        println!(
            "| {variant} | {} | {} | {} |",
            r.with_ci(g, variant, "", 1e6, 2),
            fmt(t.map(|t| t / 1e3 / DUMP_TASKS as f64), 2),
            fmt(ratio(t, ours), 2)
        );
    }
    println!(
        "\n- async-stack text / async-backtrace text: {}×; async-stack text / await-tree \
         collect+text: {}×; async-stack snapshot / await-tree snapshot: {}×",
        fmt(ratio(ours, get(names::AB_TASKDUMP)), 2),
        fmt(ratio(ours, get(names::AT_COLLECT_TEXT)), 2),
        fmt(ratio(get(names::DUMP_SNAPSHOT), get(names::AT_COLLECT)), 2)
    );
    println!("- {}", dump_target(r).line());
    println!("- {}", dump_json_target(r).line());
    println!();
}

fn dump_json_target(r: &Lookup<'_>) -> Target {
    Target::at_most(
        format!(
            "≤ {TARGET_DUMP_JSON_MS} ms for dump().to_json() of {DUMP_TASKS} tasks × {DUMP_DEPTH} frames"
        ),
        r.get(names::DUMP, names::DUMP_JSON, "").map(|ns| ns / 1e6),
        TARGET_DUMP_JSON_MS,
        " ms",
        2,
    )
}

fn dump_target(r: &Lookup<'_>) -> Target {
    Target::at_most(
        format!(
            "≤ {TARGET_DUMP_MS} ms for dump().to_string() of {DUMP_TASKS} tasks × {DUMP_DEPTH} frames"
        ),
        r.get(names::DUMP, names::DUMP_TEXT, "").map(|ns| ns / 1e6),
        TARGET_DUMP_MS,
        " ms",
        2,
    )
}

/// The `dump_cold` variants, streamed first.
const DUMP_COLD_VARIANTS: [&str; 2] = [names::COLD_WRITE_TEXT, names::COLD_TO_STRING];

fn dump_cold(r: &Lookup<'_>) {
    println!("## dump_cold\n");
    println!(
        "The first dump of {DUMP_TASKS} tasks × {DUMP_DEPTH} frames in a fresh process (one \
         process per iteration); ms per dump and MB allocated during it (95% interval):\n"
    );
    println!("| variant | ms | × whole | MB allocated | × whole |");
    println!("|---|---:|---:|---:|---:|");
    let time = |v: &str| r.get(names::DUMP_COLD, v, "");
    let bytes = |v: &str| r.get(names::DUMP_COLD_ALLOC, v, "");
    let whole = names::COLD_TO_STRING;
    for variant in DUMP_COLD_VARIANTS {
        println!(
            "| {variant} | {} | {} | {} | {} |",
            r.with_ci(names::DUMP_COLD, variant, "", 1e6, 2),
            fmt(ratio(time(variant), time(whole)), 3),
            r.with_ci(names::DUMP_COLD_ALLOC, variant, "", 1e6, 3),
            fmt(ratio(bytes(variant), bytes(whole)), 4)
        );
    }
    println!();
    for target in dump_cold_targets(r) {
        println!("- {}", target.line());
    }
    println!();
}

fn dump_cold_targets(r: &Lookup<'_>) -> [Target; 2] {
    let v = names::COLD_WRITE_TEXT;
    [
        Target::at_most(
            format!(
                "≤ {TARGET_COLD_DUMP_MS} ms for the first write_text of {DUMP_TASKS} tasks × \
                 {DUMP_DEPTH} frames in a fresh process"
            ),
            r.get(names::DUMP_COLD, v, "").map(|ns| ns / 1e6),
            TARGET_COLD_DUMP_MS,
            " ms",
            2,
        ),
        Target::at_most(
            format!("≤ {TARGET_COLD_DUMP_MB} MB allocated by that dump"),
            r.get(names::DUMP_COLD_ALLOC, v, "").map(|b| b / 1e6),
            TARGET_COLD_DUMP_MB,
            " MB",
            3,
        ),
    ]
}

/// The `memory` bench's figures, resident bytes per live task (criterion's
/// mean over its probes).
fn memory_figures(r: &Lookup<'_>, variant: Variant, depth: usize) -> Figures {
    Figures {
        bytes_per_task: r.get(names::MEMORY, variant.name(), depth),
        detail: None,
    }
}

fn memory(r: &Lookup<'_>) {
    print!("{}", memory::table(&|v, d| memory_figures(r, v, d)));
    println!(
        "(`cargo bench -p benches --bench memory` prints the same table with the future sizes and \
         heap figures of its probes.)\n"
    );
}

fn memory_target(r: &Lookup<'_>) -> Target {
    Target::at_most(
        format!(
            "≤ {} × async-backtrace's added resident bytes per live task at depth {}",
            memory::TARGET_RATIO_VS_ASYNC_BACKTRACE,
            memory::TARGET_DEPTH
        ),
        memory::target_ratio(&|v, d| memory_figures(r, v, d)),
        memory::TARGET_RATIO_VS_ASYNC_BACKTRACE,
        "×",
        2,
    )
}

/// Every target, with its verdict.
fn targets(r: &Lookup<'_>) {
    println!("## targets\n");
    println!("| target | measured | verdict |");
    println!("|---|---:|---|");
    let all = poll_depth_targets(r)
        .into_iter()
        .chain([root_poll_target(r), root_target(r), tokio_filing_target(r)])
        .chain(spawn_targets(
            r,
            names::SPAWN_CURRENT_THREAD,
            "current_thread",
        ))
        .chain(spawn_helper_targets(r))
        .chain([dump_target(r), dump_json_target(r)])
        .chain(dump_cold_targets(r))
        .chain([memory_target(r)])
        .chain(sampler_targets(r))
        .chain(wake_targets(r));
    for t in all {
        println!(
            "| {} | {} | {} |",
            t.goal,
            t.measured.as_deref().unwrap_or("n/a"),
            t.verdict()
        );
    }
    println!();
}

/// Sampler CPU time per live task per tick, ns: process CPU per tick less
/// the same program's with no sampler, over the tasks.
fn sampler_tick_ns(r: &Lookup<'_>, tasks: usize) -> Option<f64> {
    let g = names::SAMPLER_TICK;
    let tick = r.get(g, names::SAMPLER_TICK_PROCESS, tasks)?;
    Some((tick - r.get(g, names::NO_SAMPLER, tasks)?) / tasks as f64)
}

/// Extra process CPU time per unit of work with `variant` running, percent.
fn sampler_loss_pct(r: &Lookup<'_>, variant: &str) -> Option<f64> {
    let g = names::SAMPLER_THROUGHPUT;
    let base = r.get(g, names::NO_SAMPLER, SAMPLER_APP_TASKS)?;
    Some((r.get(g, variant, SAMPLER_APP_TASKS)? / base - 1.0) * 100.0)
}

fn sampler(r: &Lookup<'_>) {
    println!("## sampler\n");
    let g = names::SAMPLER_TICK;
    println!(
        "One wall-clock tick at {SAMPLER_TICK_HZ} Hz over idle tasks, 3 traced frames each; µs \
         per tick of process CPU time (95% interval), the sampler's own account \
         (`sampler_cpu_ns`), and one `dump()` of the same tasks:\n"
    );
    println!(
        "| tasks | no sampler | tick | tick, sampler_cpu_ns | ns per task per tick | dump() | \
         dump ns per task | tick / dump |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for tasks in SAMPLER_TICK_TASKS {
        let per_task = sampler_tick_ns(r, tasks);
        let dump = r.get(g, names::SAMPLER_DUMP_PEER, tasks);
        println!(
            "| {tasks} | {} | {} | {} | {} | {} | {} | {} |",
            r.with_ci(g, names::NO_SAMPLER, tasks, 1e3, 3),
            r.with_ci(g, names::SAMPLER_TICK_PROCESS, tasks, 1e3, 1),
            r.with_ci(g, names::SAMPLER_TICK_SELF, tasks, 1e3, 1),
            fmt(per_task, 1),
            r.with_ci(g, names::SAMPLER_DUMP_PEER, tasks, 1e3, 1),
            fmt(dump.map(|d| d / tasks as f64), 1),
            fmt(ratio(per_task, dump.map(|d| d / tasks as f64)), 2)
        );
    }

    let g = names::SAMPLER_THROUGHPUT;
    println!(
        "\nThe ping-pong workload, {SAMPLER_APP_TASKS} live tasks on 2 workers, samplers at \
         {SAMPLER_APP_HZ} Hz; ms of process CPU time per iteration (95% interval):\n"
    );
    println!("| variant | ms per iteration | × no sampler | extra CPU |");
    println!("|---|---:|---:|---:|");
    let base = r.get(g, names::NO_SAMPLER, SAMPLER_APP_TASKS);
    for variant in [
        names::NO_SAMPLER,
        names::SAMPLER_WALL,
        names::SAMPLER_ON_CPU,
    ] {
        let t = r.get(g, variant, SAMPLER_APP_TASKS);
        println!(
            "| {variant} | {} | {} | {} % |",
            r.with_ci(g, variant, SAMPLER_APP_TASKS, 1e6, 2),
            fmt(ratio(t, base), 3),
            fmt(sampler_loss_pct(r, variant), 1)
        );
    }

    println!(
        "\nOn-CPU signal handler, ns per signal (its own `handler_ns / signals`, 95% interval): \
         {}\n",
        r.with_ci(
            names::SAMPLER_HANDLER,
            names::HANDLER_PER_SIGNAL,
            "",
            1.0,
            0
        )
    );

    let g = names::SAMPLER_SNAPSHOT;
    println!("Snapshot of a profile filled to the default 4 MiB budget:\n");
    println!("| operation | ms (95% interval) | snapshot bytes | MiB/s |");
    println!("|---|---:|---:|---:|");
    for op in [
        names::TO_SNAPSHOT,
        names::FROM_SNAPSHOT,
        names::SAVE,
        names::LOAD,
    ] {
        let e = r.estimate(g, op, "");
        let bytes = e.and_then(|e| e.bytes);
        let rate = e
            .zip(bytes)
            .map(|(e, b)| b as f64 / f64::from(1 << 20) / (e.point / 1e9));
        println!(
            "| {op} | {} | {} | {} |",
            r.with_ci(g, op, "", 1e6, 2),
            bytes.map_or_else(|| "n/a".to_owned(), |b| b.to_string()),
            fmt(rate, 0)
        );
    }
    println!();
    for target in sampler_targets(r) {
        println!("- {}", target.line());
    }
    println!();
}

fn sampler_targets(r: &Lookup<'_>) -> Vec<Target> {
    let ticks = SAMPLER_TICK_TASKS.into_iter().map(|tasks| {
        Target::at_most(
            format!(
                "≤ {TARGET_SAMPLER_TICK_NS} ns of sampler CPU per task per tick ({tasks} idle tasks)"
            ),
            sampler_tick_ns(r, tasks),
            TARGET_SAMPLER_TICK_NS,
            " ns",
            1,
        )
    });
    let losses = [names::SAMPLER_WALL, names::SAMPLER_ON_CPU]
        .into_iter()
        .map(|variant| {
            Target::at_most(
                format!(
                    "≤ {TARGET_SAMPLER_LOSS_PCT} % throughput lost, {variant} at {SAMPLER_APP_HZ} Hz, \
                     {SAMPLER_APP_TASKS} tasks"
                ),
                sampler_loss_pct(r, variant),
                TARGET_SAMPLER_LOSS_PCT,
                " %",
                1,
            )
        });
    ticks.chain(losses).collect()
}

/// Largest acceptable cost wake recording adds to a wake, ns.
const TARGET_WAKE_NS: f64 = 50.0;

/// What recording adds, ns: `on − off` of `function`, less `minus` (another
/// function's `on − off`), over `per`.
fn wake_added(r: &Lookup<'_>, function: &str, minus: Option<&str>, per: f64) -> Option<f64> {
    let g = names::WAKE;
    let added = |f: &str| Some(r.get(g, f, names::WAKE_ON)? - r.get(g, f, names::WAKE_OFF)?);
    let base = match minus {
        Some(m) => added(m)?,
        None => 0.0,
    };
    Some((added(function)? - base) / per)
}

fn wake(r: &Lookup<'_>) {
    println!("## wake\n");
    println!(
        "Wake-graph recording on against off, in one run (`benches/benches/wake.rs`); ns per \
         iteration (95% interval) and what recording adds:\n"
    );
    println!("| | off | on | added |");
    println!("|---|---:|---:|---:|");
    let g = names::WAKE;
    let per_task = f64::from(benches::WAKES_PER_POLL);
    let rows: [(&str, &str, Option<&str>, f64, &str); 4] = [
        (
            names::WAKE_POLL,
            "per poll",
            None,
            1.0,
            "poll of a task root",
        ),
        (
            names::WAKE_FROM_TASK,
            "per wake",
            Some(names::WAKE_POLL),
            per_task,
            "poll that wakes another task 100×",
        ),
        (
            names::WAKE_FROM_RUNTIME,
            "per wake",
            None,
            1.0,
            "wake from outside a poll",
        ),
        (
            names::WAKE_AFTER_POLL,
            "per wake",
            Some(names::WAKE_POLL),
            1.0,
            "poll, then the first wake since it",
        ),
    ];
    for (function, unit, minus, per, what) in rows {
        println!(
            "| {what} | {} | {} | {} |",
            r.with_ci(g, function, names::WAKE_OFF, 1.0, 1),
            r.with_ci(g, function, names::WAKE_ON, 1.0, 1),
            wake_added(r, function, minus, per)
                .map_or_else(|| "n/a".to_owned(), |ns| format!("{ns:.1} ns {unit}")),
        );
    }
    println!();
}

fn wake_targets(r: &Lookup<'_>) -> Vec<Target> {
    vec![Target::at_most(
        format!(
            "≤ {TARGET_WAKE_NS} ns added per wake by wake-graph recording (first wake after a poll)"
        ),
        wake_added(r, names::WAKE_AFTER_POLL, Some(names::WAKE_POLL), 1.0),
        TARGET_WAKE_NS,
        " ns",
        1,
    )]
}
