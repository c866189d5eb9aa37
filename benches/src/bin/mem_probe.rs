//! `mem_probe`: resident memory per live, suspended task, one population
//! per process.
//!
//! ```text
//! mem_probe <variant> <depth> [<tasks>]
//! ```
//!
//! `variant` is `control`, `async-stack`, `async-backtrace` or
//! `await-tree`; `depth` is 3 or 16; `tasks` defaults to 100,000. It
//! spawns the population of [`benches::memory`] on a `current_thread`
//! tokio runtime, reads the resident memory before and after, checks the
//! population, and prints one JSON object ([`benches::memory::ProbeReport`]):
//!
//! ```text
//! {"variant":"control","depth":3,"tasks":100000,"rss_before":…,"rss_after":…,
//!  "bytes_per_task":…,"future_bytes":…,"heap_bytes_per_task":…,"allocs_per_task":…}
//! ```
//!
//! The `memory` bench runs it once per sample, so every figure comes from a
//! fresh process. The process exits without dropping its tasks.

use std::process::ExitCode;

use benches::memory::{self, CountingSystem, Variant};

/// glibc's allocator, as in every variant, with heap counters.
#[global_allocator]
static ALLOCATOR: CountingSystem = CountingSystem;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match &args[..] {
        [variant, depth] => parse(variant, depth, None),
        [variant, depth, tasks] => parse(variant, depth, Some(tasks)),
        _ => Err("expected <variant> <depth> [<tasks>]".to_owned()),
    };
    let (variant, depth, tasks) = match parsed {
        Ok(args) => args,
        Err(e) => {
            eprintln!(
                "mem_probe: {e}\nusage: mem_probe <{}> <{}> [<tasks>, default {}]",
                Variant::ALL.map(Variant::name).join("|"),
                memory::DEPTHS.map(|d| d.to_string()).join("|"),
                memory::TASKS
            );
            return ExitCode::FAILURE;
        }
    };
    match memory::probe(variant, depth, tasks) {
        Ok((report, runtime)) => {
            println!(
                "{}",
                serde_json::to_string(&report).expect("a report serializes")
            );
            // The tasks stay alive until the process exits.
            std::mem::forget(runtime);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mem_probe: {} at depth {depth}: {e}", variant.name());
            ExitCode::FAILURE
        }
    }
}

fn parse(
    variant: &str,
    depth: &str,
    tasks: Option<&String>,
) -> Result<(Variant, usize, usize), String> {
    let variant =
        Variant::from_name(variant).ok_or_else(|| format!("unknown variant {variant:?}"))?;
    let depth = depth
        .parse()
        .ok()
        .filter(|d| memory::DEPTHS.contains(d))
        .ok_or_else(|| format!("depth {depth:?}: expected one of {:?}", memory::DEPTHS))?;
    let tasks = match tasks {
        None => memory::TASKS,
        Some(t) => t
            .parse()
            .ok()
            .filter(|&t| t > 0)
            .ok_or_else(|| format!("tasks {t:?}: expected a positive number"))?,
    };
    Ok((variant, depth, tasks))
}
