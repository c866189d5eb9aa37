//! The wake-graph workflow on a known program: record who wakes whom,
//! reduce the graph to producer/consumer groups, and emit a workload file
//! that the `replay` example runs.
//!
//! ```text
//! cargo run --example wakes [-- <dir>]        # default dir: target/wakes
//! dot -Tsvg target/wakes/graph.dot -o target/wakes/graph.svg
//! cargo run --example replay -- target/wakes/workload.json
//! ```
//!
//! The program (`program.rs`): 1 producer feeding 4 consumers through
//! channels, 2 request/response pairs, and 1 timer-driven task, on a
//! one-worker tokio runtime. The example
//! writes `graph.json` and `graph.dot` (the graph folded by task name),
//! `reduction.json`, and `workload.json`, and prints the reduction.

use std::path::PathBuf;
use std::process::ExitCode;

use async_stack::wake::{self, Fold, ReduceOptions};

mod program;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/wakes"));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("wakes: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }

    // 1. Record.
    wake::record(true);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    println!("recording the program for {:?}...", program::RUN);
    runtime.block_on(program::program());
    wake::record(false);
    let graph = wake::graph();

    // 2. Reduce.
    let reduction = graph.reduce(ReduceOptions::default());
    println!("\n{}", reduction.summary());

    // 3. Emit.
    let workload = match reduction.workload(program::RUN) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("wakes: no workload: {e}");
            return ExitCode::FAILURE;
        }
    };
    let folded = graph.fold(Fold::Name);
    let files = [
        ("graph.json", folded.to_json()),
        ("graph.dot", folded.to_dot()),
        (
            "reduction.json",
            serde_json::to_string_pretty(&reduction).expect("a reduction serialises"),
        ),
        ("workload.json", workload.to_json()),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("wakes: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    // 4. Replay: the `replay` example.
    println!(
        "\nreplay it with: cargo run --example replay -- {}",
        dir.join("workload.json").display()
    );
    ExitCode::SUCCESS
}
