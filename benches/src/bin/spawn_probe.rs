//! `spawn_probe`: the `spawn` bench's tasks (one poll each), spawned and
//! joined a given number of times on a `current_thread` tokio runtime and
//! nothing else, for instruction counts under callgrind.
//!
//! As with `root_poll_probe`, two runs that differ only in the number of
//! tasks give the instructions of one spawn + completion + join, with
//! start-up cancelled:
//!
//! ```text
//! cargo build -p benches --profile bench --bin spawn_probe
//! for n in 2000 12000; do
//!   valgrind --tool=callgrind --separate-threads=yes \
//!     --callgrind-out-file=/tmp/cg.$n target/release/spawn_probe 'async-stack spawn helper' at-once $n
//! done
//! # instructions per task = (Ir(12000) - Ir(2000)) / 10000, from /tmp/cg.N-01
//! ```
//!
//! Arguments: the variant (`untraced`, `async-stack`, `async-stack spawn
//! helper`, `async-backtrace`; the names of [`benches::names`]), the shape
//! (`batch`: 1000 spawned, then joined in spawn order, as in
//! `spawn_current_thread`; `at-once`: each joined as soon as it is spawned,
//! so that every join waits, as in `spawn_join_current_thread`), and the
//! number of tasks. The helper's handle is awaited as users await it.
//! An optional fourth argument, a number of bytes (default 0), is
//! allocated and kept before the runtime starts: it moves where glibc
//! places everything after it. tokio's task cells are aligned to 128
//! bytes, and what `posix_memalign` costs each one depends on that
//! placement: the same binary measured 3,649 to 4,000 instructions per
//! task (the spawn helper, at once) as this argument went from 0 to 256.
//! `instructions` runs each spawn table over several such layouts.

use std::hint::black_box;
use std::process::ExitCode;

use benches::{SPAWN_TASKS, names, yield_leaf};

async fn plain() {
    yield_leaf(black_box(0)).await
}

#[async_stack::traced_async]
async fn traced() {
    yield_leaf(black_box(0)).await
}

#[async_backtrace::framed]
async fn framed() {
    yield_leaf(black_box(0)).await
}

/// Spawns one task; its join, as the variant's users await it.
type SpawnOne = fn() -> std::pin::Pin<Box<dyn Future<Output = ()>>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (variant, shape, tasks, pad) = match &args[..] {
        [variant, shape, tasks] => (variant, shape, tasks, "0"),
        [variant, shape, tasks, pad] => (variant, shape, tasks, pad.as_str()),
        _ => {
            eprintln!("usage: spawn_probe VARIANT batch|at-once TASKS [PAD BYTES]");
            return ExitCode::FAILURE;
        }
    };
    let Ok(pad) = pad.parse::<usize>() else {
        eprintln!("spawn_probe: PAD BYTES is a count");
        return ExitCode::FAILURE;
    };
    let Ok(tasks) = tasks.parse::<u32>() else {
        eprintln!("spawn_probe: TASKS is a count");
        return ExitCode::FAILURE;
    };
    let batch = match shape.as_str() {
        "batch" => SPAWN_TASKS,
        "at-once" => 1,
        _ => {
            eprintln!("spawn_probe: the shape is `batch` or `at-once`");
            return ExitCode::FAILURE;
        }
    };
    let spawn_one: SpawnOne = match variant.as_str() {
        names::UNTRACED => || {
            let h = tokio::spawn(plain());
            Box::pin(async { h.await.expect("a task panicked") })
        },
        names::ASYNC_STACK => || {
            let h = tokio::spawn(traced());
            Box::pin(async { h.await.expect("a task panicked") })
        },
        names::ASYNC_STACK_SPAWN_HELPER => || {
            let h = async_stack::tokio::spawn(traced());
            Box::pin(async { h.await.expect("a task panicked") })
        },
        names::ASYNC_BACKTRACE => || {
            let h = tokio::spawn(framed());
            Box::pin(async { h.await.expect("a task panicked") })
        },
        _ => {
            eprintln!("spawn_probe: unknown variant {variant:?}");
            return ExitCode::FAILURE;
        }
    };
    if pad > 0 {
        black_box(vec![0u8; pad].leak());
    }
    benches::warm_up_clock();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("cannot build the tokio runtime");
    rt.block_on(async {
        let mut left = tasks;
        while left > 0 {
            let n = left.min(batch);
            left -= n;
            let joins: Vec<_> = (0..n).map(|_| spawn_one()).collect();
            for join in joins {
                join.await;
            }
        }
    });
    ExitCode::SUCCESS
}
