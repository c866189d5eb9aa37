//! `instructions`: every callgrind probe of this crate in one command, as
//! one table per measurement, with what async-stack adds over the baseline
//! and its ratio to async-backtrace's.
//!
//! Timings on a shared machine move with its load, by more than the
//! differences some targets are about; instructions executed do not. Each
//! figure is `(Ir(high) - Ir(low)) / (high - low)`, two runs of a probe
//! that differ only in their count, read from the main thread's callgrind
//! file (see each probe's doc comment), so start-up cancels out. The
//! spawn tables run each variant in several heap layouts (see
//! `spawn_probe`'s last argument), since where glibc places tokio's
//! aligned task cells moves their cost by a tenth; they show the least and
//! the most, and compare the least:
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
    /// Heap layouts to measure each variant in (the probe's last
    /// argument, bytes allocated before it starts), for a probe whose
    /// allocations cost more or less by where they land; `&[]`: the probe
    /// takes no such argument.
    pads: &'static [u64],
}

/// The layouts of the spawn tables: `spawn_probe` allocates this many
/// bytes first. glibc's `posix_memalign`, which allocates tokio's task
/// cells (aligned to 128 bytes), costs from 3,649 to 4,000 instructions
/// per task in one binary across these (the spawn helper, at once), so a
/// table shows the least and the most, and compares the least. A pad of
/// `n` bytes takes a chunk of `n + 16` and shifts what follows by that
/// much; the costs repeat every 128 bytes of shift, and these eight shift
/// by 0, 32, 48, 64, 80, 96, 112 and 144 (16 past 128): every step of 16.
const SPAWN_PADS: &[u64] = &[0, 16, 32, 48, 64, 80, 96, 128];

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
        pads: &[],
    },
    Table {
        name: "calls: a task poll making 8 calls of an instrumented fn that completes at once",
        probe: "root_poll_probe",
        mode: "calls",
        low: 5_000,
        high: 15_000,
        unit: "poll (8 calls)",
        variants: ROOT_VARIANTS,
        pads: &[],
    },
    Table {
        name: "wide: a task poll completing 128 calls awaited at once and starting 128 more (66 past the published stack)",
        probe: "root_poll_probe",
        mode: "wide",
        low: 500,
        high: 1_500,
        unit: "poll (128 calls)",
        variants: ROOT_VARIANTS,
        pads: &[],
    },
    Table {
        name: "root poll, depth 1",
        probe: "root_poll_probe",
        mode: "1",
        low: 5_000,
        high: 15_000,
        unit: "poll",
        variants: ROOT_VARIANTS,
        pads: &[],
    },
    Table {
        name: "root poll, depth 1, inside a spawn helper's wrapper (`task::spawned`), as a task spawned through a helper is polled",
        probe: "root_poll_probe",
        mode: "1",
        low: 5_000,
        high: 15_000,
        unit: "poll",
        variants: &[
            names::UNTRACED,
            names::ASYNC_STACK,
            "async-stack-spawned",
            names::ASYNC_BACKTRACE,
        ],
        pads: &[],
    },
    Table {
        name: "root poll, depth 8 (8 boxed levels)",
        probe: "root_poll_probe",
        mode: "8",
        low: 5_000,
        high: 15_000,
        unit: "poll",
        variants: ROOT_VARIANTS,
        pads: &[],
    },
    Table {
        name: "poll_depth's chain at depth 8, one yield",
        probe: "root_poll_probe",
        mode: "yield8",
        low: 5_000,
        high: 15_000,
        unit: "poll",
        variants: &[names::UNTRACED, names::ASYNC_STACK],
        pads: &[],
    },
    Table {
        name: "spawn + completion + join, current_thread, in batches of 1000",
        probe: "spawn_probe",
        mode: "batch",
        low: 2_000,
        high: 12_000,
        unit: "task",
        variants: SPAWN_VARIANTS,
        pads: SPAWN_PADS,
    },
    Table {
        name: "spawn + completion + join, current_thread, each awaited at once",
        probe: "spawn_probe",
        mode: "at-once",
        low: 2_000,
        high: 12_000,
        unit: "task",
        variants: SPAWN_VARIANTS,
        pads: SPAWN_PADS,
    },
    Table {
        name: "lock: uncontended lock + unlock",
        probe: "locks_probe",
        mode: "uncontended",
        low: 20_000,
        high: 60_000,
        unit: "operation",
        variants: LOCK_VARIANTS,
        pads: &[],
    },
    Table {
        name: "lock: one wait, the mutex's first and last, and an uncontended lock",
        probe: "locks_probe",
        mode: "contended",
        low: 20_000,
        high: 60_000,
        unit: "round",
        variants: LOCK_VARIANTS,
        pads: &[],
    },
    Table {
        name: "lock: two tasks taking turns (two overlapping waits)",
        probe: "locks_probe",
        mode: "turns",
        low: 20_000,
        high: 60_000,
        unit: "round",
        variants: LOCK_VARIANTS,
        pads: &[],
    },
    Table {
        name: "lock: RwLock read, uncontended",
        probe: "locks_probe",
        mode: "read",
        low: 20_000,
        high: 60_000,
        unit: "operation",
        variants: LOCK_VARIANTS,
        pads: &[],
    },
    Table {
        name: "lock: Semaphore permit, uncontended",
        probe: "locks_probe",
        mode: "permit",
        low: 20_000,
        high: 60_000,
        unit: "operation",
        variants: LOCK_VARIANTS,
        pads: &[],
    },
];

/// One callgrind run: table `table`, variant `variant`, count `count`, in
/// heap layout `pad` (`0` for a table without layouts).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Run {
    table: usize,
    variant: usize,
    count: u64,
    pad: u64,
}

impl Table {
    /// The heap layouts each variant is measured in: one, the probe's
    /// own, for a table without any.
    fn layouts(&self) -> &'static [u64] {
        if self.pads.is_empty() {
            &[0]
        } else {
            self.pads
        }
    }
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
            for &pad in t.layouts() {
                for count in [t.low, t.high] {
                    queue.push(Run {
                        table,
                        variant,
                        count,
                        pad,
                    });
                }
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
    let out: PathBuf = dir.join(format!(
        "cg.{}.{}.{}.{}",
        run.table, run.variant, run.count, run.pad
    ));
    let pad = run.pad.to_string();
    let layout = if t.pads.is_empty() {
        None
    } else {
        Some(pad.as_str())
    };
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--separate-threads=yes")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(here.join(t.probe))
        .args([variant, t.mode, &run.count.to_string()])
        .args(layout)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let what = format!(
        "{} {variant:?} {} {} {}",
        t.probe, t.mode, run.count, run.pad
    );
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
        // Per variant, the figure in each layout, least first.
        let figures: Vec<Vec<f64>> = (0..t.variants.len())
            .map(|variant| {
                let mut per: Vec<f64> = t
                    .layouts()
                    .iter()
                    .map(|&pad| {
                        let at = |count| {
                            ir[&Run {
                                table,
                                variant,
                                count,
                                pad,
                            }] as f64
                        };
                        (at(t.high) - at(t.low)) / (t.high - t.low) as f64
                    })
                    .collect();
                per.sort_by(f64::total_cmp);
                per
            })
            .collect();
        let per: Vec<f64> = figures.iter().map(|f| f[0]).collect();
        let added = |v: usize| per[v] - per[0];
        // The ratio column, for the tables that measure async-backtrace.
        let peer = t
            .variants
            .iter()
            .position(|&v| v == names::ASYNC_BACKTRACE)
            .map(added);
        let layouts = t.pads.len();
        if layouts > 0 {
            println!(
                "\n{}, instructions per {} (the least of {layouts} heap layouts; the most beside it)",
                t.name, t.unit
            );
        } else {
            println!("\n{}, instructions per {}", t.name, t.unit);
        }
        let mut header = vec!["variant".to_owned(), format!("per {}", t.unit)];
        if layouts > 0 {
            header.push("most".into());
        }
        header.push("added".into());
        if peer.is_some() {
            header.push("added / async-backtrace's".into());
        }
        print_row(&header);
        println!("|---{}|", "|---:".repeat(header.len() - 1));
        for (v, &name) in t.variants.iter().enumerate() {
            let baseline = v == 0;
            let mut cells = vec![name.to_owned(), format!("{:.0}", per[v])];
            if layouts > 0 {
                cells.push(format!("{:.0}", figures[v][figures[v].len() - 1]));
            }
            cells.push(if baseline {
                String::new()
            } else {
                format!("{:+.0}", added(v))
            });
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
            // Only `spawn_probe` takes a layout, and its tables need them.
            assert_eq!(t.probe == "spawn_probe", !t.pads.is_empty(), "{}", t.name);
        }
    }
}
