//! Replaying a workload file.
//!
//! A workload file (format: `async_stack::workload`) describes a program's
//! tasks as producer/consumer groups and independent tasks, with busy and
//! idle times. This example replays one on a multi-thread tokio runtime:
//! every task is spawned under the name the file gives it, so a dump, a
//! profile or a wake-graph recording taken meanwhile shows the same tasks
//! as the program the file was recorded from. At the end it prints what
//! each kind of task did, and the wake graph of the replay reduced to
//! groups (recorded with `async_stack::wake`), to compare with the
//! reduction the file came from.
//!
//! ```text
//! cargo run --example replay -- examples/workloads/pairs.json [--duration-ms N]
//! ```
//!
//! `--duration-ms` overrides the file's `duration_ms`. A file or argument
//! that cannot be used is reported on stderr (naming the field at fault),
//! and the example exits with status 1 for the file, 2 for the arguments.

use std::process::ExitCode;
use std::time::Duration;

use async_stack::workload::{Workload, replay};

const USAGE: &str = "usage: replay <workload.json> [--duration-ms N]";

/// What the command line asks for. `--help` is an empty error.
struct Args {
    file: String,
    duration_ms: Option<u64>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut file = None;
    let mut duration_ms = None;
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Err(String::new());
        } else if arg == "--duration-ms" {
            let value = args
                .next()
                .ok_or_else(|| "--duration-ms needs a value".to_owned())?;
            let ms: u64 = value.parse().map_err(|_| {
                format!("--duration-ms: not a whole number of milliseconds: {value:?}")
            })?;
            if !(1..=Workload::MAX_DURATION_MS).contains(&ms) {
                return Err(format!(
                    "--duration-ms: must be between 1 and {}, got {ms}",
                    Workload::MAX_DURATION_MS
                ));
            }
            duration_ms = Some(ms);
        } else if arg.starts_with('-') {
            return Err(format!("unknown option {arg:?}"));
        } else if file.replace(arg).is_some() {
            return Err("more than one workload file".to_owned());
        }
    }
    Ok(Args {
        file: file.ok_or_else(|| "no workload file".to_owned())?,
        duration_ms,
    })
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("replay: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let workload = match Workload::load(&args.file) {
        Ok(w) => w,
        Err(e) if e.path().is_empty() => {
            // About the file itself: the message names it.
            eprintln!("replay: {e}");
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("replay: {}: {e}", args.file);
            return ExitCode::from(1);
        }
    };
    let duration = Duration::from_millis(args.duration_ms.unwrap_or(workload.duration_ms));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("replay: cannot start the tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let tasks: u64 = workload
        .groups
        .iter()
        .map(|g| {
            1 + g
                .consumers
                .iter()
                .map(|c| u64::from(c.instances))
                .sum::<u64>()
        })
        .chain(workload.independent.iter().map(|i| u64::from(i.instances)))
        .sum();
    println!(
        "replaying {} ({} groups, {} independent, {tasks} tasks) for {:.2}s",
        args.file,
        workload.groups.len(),
        workload.independent.len(),
        duration.as_secs_f64()
    );
    async_stack::wake::record(true);
    let result = runtime.block_on(replay(&workload, duration));
    async_stack::wake::record(false);
    match result {
        Ok(report) => {
            println!("{report}");
            let reduction = async_stack::wake::graph().reduce(Default::default());
            println!(
                "wake graph of the replay, reduced:\n{}",
                reduction.summary()
            );
            ExitCode::SUCCESS
        }
        // `load` validated it already: reported all the same, not unwrapped.
        Err(e) => {
            eprintln!("replay: {}: {e}", args.file);
            ExitCode::from(1)
        }
    }
}
