//! `wake_replay_fidelity`: how closely a replayed workload reproduces the
//! busy/idle ratio of each task of the program it was recorded from.
//!
//! The same round trip as `tests/tests/wake_replay.rs` (record the known
//! program of `examples/examples/wakes/program.rs`, reduce, emit a
//! workload, replay it, record and reduce again), measured rather than
//! tested: the replay spins for the recorded busy times, so its busy/idle
//! ratios move with the machine's load, and a test must not time anything.
//! The test checks that the replay has the same groups; this program
//! prints each member's ratio, recorded and replayed, and exits with
//! status 1 when one moved by more than 20% (the target). Run it on a
//! quiet machine:
//!
//! ```text
//! cargo run -p benches --release --bin wake_replay_fidelity
//! ```

use std::process::ExitCode;

use async_stack::wake::{self, ReduceOptions, Reduction};
use async_stack::workload;

#[path = "../../../examples/examples/wakes/program.rs"]
mod program;

/// The target: every member's busy/idle ratio within 20% of the
/// recorded one.
const MAX_CHANGE: f64 = 0.2;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("cannot build the tokio runtime")
}

/// Busy/idle ratio of every member, by label.
fn ratios(r: &Reduction) -> Vec<(String, f64)> {
    r.members()
        .into_iter()
        .map(|m| (m.label.clone(), m.busy_idle_ratio()))
        .collect()
}

fn main() -> ExitCode {
    wake::record(true);
    runtime().block_on(program::program());
    let original = wake::graph().reduce(ReduceOptions::default());
    let w = match original.workload(program::RUN) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("wake_replay_fidelity: cannot emit the workload: {e}");
            return ExitCode::FAILURE;
        }
    };
    wake::reset();
    if let Err(e) = runtime().block_on(workload::replay(&w, program::RUN)) {
        eprintln!("wake_replay_fidelity: the replay failed: {e}");
        return ExitCode::FAILURE;
    }
    wake::record(false);
    let replayed = wake::graph().reduce(ReduceOptions::default());
    println!(
        "recorded:\n{}\nreplayed:\n{}",
        original.summary(),
        replayed.summary()
    );
    if original.structure() != replayed.structure() {
        eprintln!("wake_replay_fidelity: the replay has other groups");
        return ExitCode::FAILURE;
    }
    let mut worst: f64 = 0.0;
    for ((label, before), (_, after)) in ratios(&original).iter().zip(&ratios(&replayed)) {
        let change = after / before - 1.0;
        worst = worst.max(change.abs());
        println!(
            "{label:<10} busy/idle {before:.3} recorded, {after:.3} replayed ({:+.1}%)",
            change * 100.0
        );
    }
    println!(
        "largest change {:.1}% (target: at most {:.0}%)",
        worst * 100.0,
        MAX_CHANGE * 100.0
    );
    if worst <= MAX_CHANGE {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
