//! The wake graph's round trip, as the README tells a user to do it:
//! record a known program, reduce the graph to groups, emit a workload,
//! replay it, record the replay, and get the same groups back. How close
//! the replay's busy/idle ratios come to the original's (the target is
//! 20%) depends on the machine's load, so it is measured, not tested:
//! `cargo run -p benches --release --bin wake_replay_fidelity` (see
//! `BENCHMARKS.md`); this test prints the ratios.
//!
//! The program (`examples/examples/wakes/program.rs`): 1 producer feeding
//! 4 consumers through channels, 2 independent request/response pairs,
//! and 1 timer-driven task, on a one-worker tokio runtime. One worker
//! keeps the second core free for the timer, the clock thread and the
//! test harness: with both cores spinning, those threads preempt a
//! spinning poll, whose busy (wall) time then grows, and a replay of that
//! longer busy time grows again by the same amount.

use std::time::{Duration, Instant};

use async_stack::wake::{self, ReduceOptions, Reduction};
use async_stack::workload::{self, Workload};

#[path = "../../examples/examples/wakes/program.rs"]
mod program;

use program::{RUN, program};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Busy/idle ratio of every member, by label.
fn ratios(r: &Reduction) -> Vec<(String, f64)> {
    r.members()
        .into_iter()
        .map(|m| (m.label.clone(), m.busy_idle_ratio()))
        .collect()
}

const EXPECTED: [&str; 4] = [
    "client-1 -> [server-1×1] replies=true",
    "client-2 -> [server-2×1] replies=true",
    "producer -> [consumer×4] replies=false",
    "independent ticker×1",
];

/// Upper bound for waiting on the replay; never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// The replay's end: `RUN`, and then, if its worker got little of that
/// time (a loaded machine), until the recording shows the program's
/// groups, for at most [`PATIENCE`] more (the test then fails on what it
/// shows).
async fn replayed_enough() {
    tokio::time::sleep(RUN).await;
    let deadline = Instant::now() + PATIENCE;
    while wake::graph().reduce(ReduceOptions::default()).structure() != EXPECTED
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn record_reduce_emit_replay_and_record_again() {
    // 1. Record the known program.
    wake::record(true);
    runtime().block_on(program());
    let original = wake::graph().reduce(ReduceOptions::default());
    // 2. Exactly its groups.
    assert_eq!(original.structure(), EXPECTED, "{}", original.summary());

    // 3. Emit the workload; it is a valid file.
    let w = original.workload(RUN).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("workload.json");
    w.save(&path).unwrap();
    let w = Workload::load(&path).unwrap();
    assert_eq!(w.groups.len(), 3);
    assert_eq!(w.independent.len(), 1);

    // 4. Replay it, recording again from scratch.
    wake::reset();
    let report = runtime()
        .block_on(workload::replay_until(&w, replayed_enough()))
        .unwrap();
    wake::record(false);
    let replayed = wake::graph().reduce(ReduceOptions::default());
    assert_eq!(
        replayed.structure(),
        EXPECTED,
        "original:\n{}\nreplay:\n{}\n{report}",
        original.summary(),
        replayed.summary()
    );
    // 5. Every member replayed, by label; the ratios are printed (see the
    // module docs for where their fidelity is measured).
    let (a, b) = (ratios(&original), ratios(&replayed));
    assert_eq!(
        a.iter().map(|x| &x.0).collect::<Vec<_>>(),
        b.iter().map(|x| &x.0).collect::<Vec<_>>()
    );
    for ((label, before), (_, after)) in a.iter().zip(&b) {
        eprintln!(
            "{label:<10} busy/idle {before:.3} recorded, {after:.3} replayed ({:+.1}%)",
            (after / before - 1.0) * 100.0
        );
    }
}
