//! `instructions`: every callgrind probe of this crate in one command, as
//! one table per measurement, with what async-stack adds over the baseline
//! and its ratio to async-backtrace's.
//!
//! Timings on a shared machine move with its load, by more than the
//! differences some targets are about; instructions executed do not. Each
//! figure is `(Ir(high) - Ir(low)) / (high - low)`, two runs of a probe
//! that differ only in their count, read from the main thread's callgrind
//! file (see each probe's doc comment), so start-up cancels out:
//!
//! ```text
//! cargo build -p benches --profile bench --bins
//! target/release/instructions          # every table (a few minutes)
//! target/release/instructions spawn    # the tables whose name contains "spawn"
//! ```
//!
//! It runs the probes next to its own executable (`root_poll_probe`,
//! `spawn_probe`, `locks_probe`), as many at once as the machine has
//! cores, under `valgrind` (Debian package `valgrind`), and leaves nothing
//! behind: the callgrind files go in a directory of its own under the
//! system's temporary directory, removed at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;

use benches::names;

/// One table: a probe in one mode, run for each variant.
struct Table {
    name: &'static str,
    probe: &'static str,
    /// The probe's argument after the variant (depth, shape or scenario).
    mode: &'static str,
    low: u64,
    high: u64,
    /// What one unit of the count is.
    unit: &'static str,
    /// The baseline first; then the variants measured against it.
    variants: &'static [&'static str],
}

/// `locks_probe`'s baseline variant.
const TOKIO: &str = "tokio";

const ROOT_VARIANTS: &[&str] = &[names::UNTRACED, names::ASYNC_STACK, names::ASYNC_BACKTRACE];
const SPAWN_VARIANTS: &[&str] = &[
    names::UNTRACED,
    names::ASYNC_STACK,
    names::ASYNC_STACK_SPAWN_HELPER,
    names::ASYNC_BACKTRACE,
];
const LOCK_VARIANTS: &[&str] = &[TOKIO, names::ASYNC_STACK];

const TABLES: &[Table] = &[
    Table {
        name: "root once: a one-level task created, polled to completion and dropped",
        probe: "root_poll_probe",
        mode: "once",
        low: 5_000,
        high: 15_000,
        unit: "task",
        variants: ROOT_VARIANTS,
    },
    Table {
        name: "calls: a task poll making 8 calls of an instrumented fn that completes at once",
        probe: "root_poll_probe",
        mode: "calls",
        low: 5_000,
        high: 15_000,
        unit: "poll (8 calls)",
        variants: ROOT_VARIANTS,
    },
    Table {
        name: "wide: a task poll completing 128 calls awaited at once and starting 128 more (66 past the published stack)",
        probe: "root_poll_probe",
        mode: "wide",
        low: 500,
        high: 1_500,
        unit: "poll (128 calls)",
        variants: ROOT_VARIANTS,
    },
    Table {
        name: "root poll, depth 1",
        probe: "root_poll_probe",
        mode: "1",
        low: 5_000,
        high: 15_000,
        unit: "poll",
        variants: ROOT_VARIANTS,
    },
    Table {
        name: "root poll, depth 8 (8 boxed levels)",
        probe: "root_poll_probe",
        mode: "8",
        low: 5_000,
        high: 15_000,
        unit: "poll",
        variants: ROOT_VARIANTS,
    },
    Table {
        name: "poll_depth's chain at depth 8, one yield",
        probe: "root_poll_probe",
        mode: "yield8",
        low: 5_000,
        high: 15_000,
        unit: "poll",
        variants: &[names::UNTRACED, names::ASYNC_STACK],
    },
    Table {
        name: "spawn + completion + join, current_thread, in batches of 1000",
        probe: "spawn_probe",
        mode: "batch",
        low: 2_000,
        high: 12_000,
        unit: "task",
        variants: SPAWN_VARIANTS,
    },
    Table {
        name: "spawn + completion + join, current_thread, each awaited at once",
        probe: "spawn_probe",
        mode: "at-once",
        low: 2_000,
        high: 12_000,
        unit: "task",
        variants: SPAWN_VARIANTS,
    },
    Table {
        name: "lock: uncontended lock + unlock",
        probe: "locks_probe",
        mode: "uncontended",
        low: 20_000,
        high: 60_000,
        unit: "operation",
        variants: LOCK_VARIANTS,
    },
    Table {
        name: "lock: one wait, the mutex's first and last, and an uncontended lock",
        probe: "locks_probe",
        mode: "contended",
        low: 20_000,
        high: 60_000,
        unit: "round",
        variants: LOCK_VARIANTS,
    },
    Table {
        name: "lock: two tasks taking turns (two overlapping waits)",
        probe: "locks_probe",
        mode: "turns",
        low: 20_000,
        high: 60_000,
        unit: "round",
        variants: LOCK_VARIANTS,
    },
    Table {
        name: "lock: RwLock read, uncontended",
        probe: "locks_probe",
        mode: "read",
        low: 20_000,
        high: 60_000,
        unit: "operation",
        variants: LOCK_VARIANTS,
    },
    Table {
        name: "lock: Semaphore permit, uncontended",
        probe: "locks_probe",
        mode: "permit",
        low: 20_000,
        high: 60_000,
        unit: "operation",
        variants: LOCK_VARIANTS,
    },
];

/// One callgrind run: table `table`, variant `variant`, count `count`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Run {
    table: usize,
    variant: usize,
    count: u64,
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("instructions: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let filter = match &args[..] {
        [] => "",
        [f] if !f.starts_with('-') => f.as_str(),
        _ => return Err("usage: instructions [TABLE NAME FILTER]".into()),
    };
    let tables: Vec<usize> = (0..TABLES.len())
        .filter(|&t| TABLES[t].name.contains(filter))
        .collect();
    if tables.is_empty() {
        return Err(format!("no table's name contains {filter:?}"));
    }
    let here = std::env::current_exe()
        .map_err(|e| format!("cannot find this executable: {e}"))?
        .parent()
        .map(Path::to_path_buf)
        .ok_or("this executable has no directory")?;
    for &t in &tables {
        let probe = here.join(TABLES[t].probe);
        if !probe.is_file() {
            return Err(format!(
                "{} is missing: build the probes first, with \
                 `cargo build -p benches --profile bench --bins`",
                probe.display()
            ));
        }
    }
    match Command::new("valgrind").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => {
            return Err("valgrind is not installed (Debian: `apt-get install valgrind`)".into());
        }
    }
    let dir = std::env::temp_dir().join(format!("async-stack-instructions.{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let result = measure(&here, &dir, &tables);
    let _ = std::fs::remove_dir_all(&dir);
    print_tables(&tables, &result?);
    Ok(())
}

/// Runs every run of `tables` under callgrind, a core's worth at a time;
/// the main thread's instruction count of each.
fn measure(here: &Path, dir: &Path, tables: &[usize]) -> Result<BTreeMap<Run, u64>, String> {
    let mut queue: Vec<Run> = Vec::new();
    for &table in tables {
        let t = &TABLES[table];
        for variant in 0..t.variants.len() {
            for count in [t.low, t.high] {
                queue.push(Run {
                    table,
                    variant,
                    count,
                });
            }
        }
    }
    let total = queue.len();
    queue.reverse();
    let queue = Mutex::new(queue);
    let done = Mutex::new(BTreeMap::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let Some(run) = queue.lock().expect("no worker panics").pop() else {
                        return;
                    };
                    let counted = callgrind(here, dir, run);
                    let mut done = done.lock().expect("no worker panics");
                    done.insert(run, counted);
                    eprint!("\r{} of {total} runs", done.len());
                }
            });
        }
    });
    eprintln!();
    done.into_inner()
        .expect("no worker panics")
        .into_iter()
        .map(|(run, counted)| counted.map(|ir| (run, ir)))
        .collect()
}

/// The main thread's instructions in one run of a probe under callgrind.
fn callgrind(here: &Path, dir: &Path, run: Run) -> Result<u64, String> {
    let t = &TABLES[run.table];
    let variant = t.variants[run.variant];
    let out: PathBuf = dir.join(format!("cg.{}.{}.{}", run.table, run.variant, run.count));
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--separate-threads=yes")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(here.join(t.probe))
        .args([variant, t.mode, &run.count.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let what = format!("{} {variant:?} {} {}", t.probe, t.mode, run.count);
    if !status.success() {
        return Err(format!("{what} failed under valgrind ({status})"));
    }
    // With `--separate-threads=yes` the main thread's file ends in `-01`.
    let main = PathBuf::from(format!("{}-01", out.display()));
    let text = std::fs::read_to_string(&main)
        .map_err(|e| format!("{what}: cannot read {}: {e}", main.display()))?;
    totals(&text).ok_or_else(|| format!("{what}: no `totals:` line in {}", main.display()))
}

/// The instruction count of a callgrind file's `totals:` line (its first
/// event is `Ir` when no other event is asked for).
fn totals(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("totals:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn print_tables(tables: &[usize], ir: &BTreeMap<Run, u64>) {
    for &table in tables {
        let t = &TABLES[table];
        let per: Vec<f64> = (0..t.variants.len())
            .map(|variant| {
                let at = |count| {
                    ir[&Run {
                        table,
                        variant,
                        count,
                    }] as f64
                };
                (at(t.high) - at(t.low)) / (t.high - t.low) as f64
            })
            .collect();
        let added = |v: usize| per[v] - per[0];
        // The ratio column, for the tables that measure async-backtrace.
        let peer = t
            .variants
            .iter()
            .position(|&v| v == names::ASYNC_BACKTRACE)
            .map(added);
        println!("\n{}, instructions per {}", t.name, t.unit);
        let mut header = vec![
            "variant".to_owned(),
            format!("per {}", t.unit),
            "added".into(),
        ];
        if peer.is_some() {
            header.push("added / async-backtrace's".into());
        }
        print_row(&header);
        println!("|---{}|", "|---:".repeat(header.len() - 1));
        for (v, &name) in t.variants.iter().enumerate() {
            let baseline = v == 0;
            let mut cells = vec![
                name.to_owned(),
                format!("{:.0}", per[v]),
                if baseline {
                    String::new()
                } else {
                    format!("{:+.0}", added(v))
                },
            ];
            if let Some(peer) = peer {
                cells.push(
                    if baseline || name == names::ASYNC_BACKTRACE || peer <= 0.0 {
                        String::new()
                    } else {
                        format!("{:.2}×", added(v) / peer)
                    },
                );
            }
            print_row(&cells);
        }
    }
}

/// One row of a Markdown table.
fn print_row(cells: &[String]) {
    println!("| {} |", cells.join(" | "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_the_first_figure_of_the_totals_line() {
        let file = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\n\
                    summary: 806073\ntotals: 806073\n";
        assert_eq!(totals(file), Some(806_073));
        assert_eq!(totals("totals: 12 34\n"), Some(12));
    }

    #[test]
    fn a_file_without_a_readable_totals_line_gives_none() {
        for bad in [
            "",
            "summary: 5\n",
            "totals:\n",
            "totals: many\n",
            "totals: -3\n",
        ] {
            assert_eq!(totals(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_table_has_a_baseline_and_a_count_that_grows() {
        for t in TABLES {
            assert!(t.variants.len() >= 2, "{}", t.name);
            assert!(t.low < t.high, "{}", t.name);
            let base = t.variants[0];
            assert!(base == names::UNTRACED || base == TOKIO, "{}", t.name);
        }
    }
}
