//! `summary`: prints the tables of BENCHMARKS.md from criterion's results.
//!
//! Reads every `<criterion dir>/**/new/{benchmark,estimates}.json` left by
//! `cargo bench -p benches` and prints markdown: the `poll_depth` per-level
//! per-poll table with the async-stack / async-backtrace and
//! async-stack / await-tree ratios and the targets, then the `root` and
//! `capture` tables. Each time is criterion's headline estimate (the
//! regression slope when criterion has one, else the mean), the number
//! printed after `time:` by `cargo bench`.
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

use benches::{DEPTHS, POLLS_PER_FUTURE, names};
use serde_json::Value;

/// Per-level cost the design aims for at depth 8, in ns per level per poll.
const TARGET_NS_PER_LEVEL: f64 = 2.0;
/// Largest acceptable async-stack / async-backtrace per-level ratio.
const TARGET_RATIO_VS_ASYNC_BACKTRACE: f64 = 0.5;

/// `(group, function, parameter)` -> criterion's typical time in ns.
type Results = BTreeMap<(String, String, String), Estimate>;

/// Criterion's typical estimate and its 95% confidence interval, in ns.
#[derive(Clone, Copy, Debug)]
struct Estimate {
    point: f64,
    lower: f64,
    upper: f64,
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
    root(&r);
    capture(&r);
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
    names::NATIVE_FRAMES,
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

    // (variant - untraced) / (depth * polls)
    let per_level = |variant: &str, depth: u32| {
        let extra = r.get(g, variant, depth)? - r.get(g, names::UNTRACED, depth)?;
        Some(extra / (f64::from(depth) * polls))
    };
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
        row(depth.to_string(), &|v| per_level(v, depth));
    }
    row("marginal 8→32".to_owned(), &marginal);

    println!();
    let ours = per_level(names::ASYNC_STACK, 8);
    match ours {
        Some(ns) if ns <= TARGET_NS_PER_LEVEL => {
            println!("- target ≤ {TARGET_NS_PER_LEVEL} ns/level/poll at depth 8: {ns:.2} ns, met")
        }
        Some(ns) => println!(
            "- target ≤ {TARGET_NS_PER_LEVEL} ns/level/poll at depth 8: {ns:.2} ns, \
             missed by {:.2} ns ({:.2}× the target)",
            ns - TARGET_NS_PER_LEVEL,
            ns / TARGET_NS_PER_LEVEL
        ),
        None => println!("- target at depth 8: n/a"),
    }
    match ratio(ours, per_level(names::ASYNC_BACKTRACE, 8)) {
        Some(q) if q <= TARGET_RATIO_VS_ASYNC_BACKTRACE => println!(
            "- target ≤ {TARGET_RATIO_VS_ASYNC_BACKTRACE} × async-backtrace at depth 8: {q:.2}×, met"
        ),
        Some(q) => println!(
            "- target ≤ {TARGET_RATIO_VS_ASYNC_BACKTRACE} × async-backtrace at depth 8: {q:.2}×, \
             missed ({:.2}× the allowed ratio)",
            q / TARGET_RATIO_VS_ASYNC_BACKTRACE
        ),
        None => println!("- target vs async-backtrace at depth 8: n/a"),
    }
    println!();
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
            let extra = t.zip(base).map(|(t, b)| t - b);
            println!(
                "| {polls} | {variant} | {} | {} | {} |",
                r.with_ci(g, variant, polls, 1.0, 1),
                fmt(extra, 1),
                fmt(ratio(t, base), 1)
            );
        }
    }
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
