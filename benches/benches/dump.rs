//! `dump`: a dump of 10,000 live, suspended tasks, 9 frames deep, as text
//! and as JSON.
//!
//! # What runs
//!
//! [`DUMP_TASKS`] (10,000) tasks are spawned on a `current_thread` tokio
//! runtime. Each is a chain of [`DUMP_DEPTH`] (9) instrumented async fns,
//! `l9 -> l8 -> ... -> l1 -> park`, where `park` is a plain future that is
//! `Pending` forever and never wakes anyone. The runtime runs until every
//! task has reached `park` (it counts its first polls), then stays alive and
//! idle while the dumps are timed from the benchmark thread: every task is
//! suspended, none is running. Building the tasks is outside the timing.
//! The async-stack tasks are those of [`benches::dump_population`], which
//! the `dump_cold` bench dumps too (in a fresh process).
//!
//! One population per library, built before its benchmarks and dropped
//! (runtime shut down, tasks dropped) after them, so exactly one population
//! of 10,000 tasks is alive at any time and no library's dump sees, or
//! walks past, another's tasks. After the async-stack population is dropped
//! the bench checks that async-stack's registry is empty again.
//!
//! Variants, one criterion group:
//!
//! - `async-stack dump()`: `async_stack::dump()`, the snapshot alone (every
//!   live task's published stack copied, sites resolved to names and
//!   file:line:column).
//! - `async-stack dump().to_text(false)`: the snapshot rendered to the
//!   Go-style text, in one `String` that `to_text` preallocates: per task a
//!   header, each frame with the `.await` it is suspended at (`awaiting at
//!   benches/src/dump_population.rs:LINE:COL`), and a footer.
//! - `async-stack dump().to_string()`: the same text through `Display`,
//!   into a `String` that grows as `to_string` writes it. This is the
//!   figure the target (at most 5 ms) applies to. Both renderings format
//!   each distinct frame and each distinct stack once and copy the text
//!   wherever it repeats (here, 90,000 frames: 9 distinct frames, 1
//!   distinct stack).
//! - `async-stack write_text(sink)`: the same text streamed, one task at a
//!   time, into `io::sink()` (`async_stack::dump::write_text`): no
//!   snapshot of all tasks and no string of all the text, only a buffer of
//!   32 KB. The order differs (registry order, not by id); the text does
//!   not.
//! - `async-stack dump().to_json()`: the snapshot as (pretty) JSON, in
//!   one `String` sized up front; like the text, each distinct frame and
//!   stack is written once and copied where it repeats. The target (at
//!   most 10 ms) applies to this figure.
//! - `async-stack to_json() of a dump`: `to_json()` alone, of a dump
//!   taken once before the timing: the JSON's share of the figure above.
//! - `async-stack write_json(sink)`: the same JSON streamed, one task at a
//!   time, into `io::sink()` (`async_stack::dump::write_json`), in memory
//!   that does not grow with the tasks; compare it with `write_text(sink)`.
//! - `async-backtrace taskdump_tree(false)`: tasks built from
//!   `#[async_backtrace::framed]` fns; one line per frame with the fn's
//!   definition site (the peers' chains come from [`benches::chain!`], so
//!   all their levels show the line of its invocation; their cost does not
//!   depend on it). `false`: do not wait for running tasks (it would
//!   make no difference here, none runs; `true` can deadlock, see its docs).
//! - `await-tree collect_all()`: tasks spawned as
//!   `registry.register(i, "l9 at FILE:LINE").instrument(l9())`, each level
//!   awaiting the next through `instrument_await("lK at FILE:LINE")` (the
//!   root span plus 8 instrumented awaits: 9 nodes, each naming its
//!   `.await` line); `Registry::collect_all()` clones every tree.
//! - `await-tree collect_all()+to_string`: the same, every tree rendered
//!   (`Display`) into one string, with its key, as await-tree's examples do.
//!
//! Before timing, each population is checked (assertions, outside the
//! timing): async-stack's dump holds exactly 10,000 tasks, all idle, each
//! with 9 frames `l9..l1`, each frame suspended at its `.await` in
//! `benches/src/dump_population.rs`;
//! async-backtrace's taskdump has 10,000 tasks of 9 frames and no `POLLING`
//! task; await-tree has 10,000 trees of 9 nodes. One task of each is
//! printed once (stderr), to show what the dumps contain.
//!
//! # What each dump pauses
//!
//! async-stack's dump pauses nothing by design: it copies each task's
//! published stack under a sequence counter and never waits for a task, so
//! a task polled during a dump is neither blocked nor delayed. (The one lock
//! it touches is the read side of the interned-site table's `RwLock`, once
//! per dump to copy the table, and again only for a site registered during
//! the dump; a task takes the write side only the first time the process
//! passes a given call site or `.await`.) The peers lock: async-backtrace iterates its task set holding the set's
//! shard read locks (spawning or completing a framed task waits) and holds
//! each task's mutex while formatting it (a poll of that task waits);
//! await-tree holds its registry's read lock (registering waits) and each
//! task's tree mutex while cloning it (a poll of that task waits). With
//! every task suspended, as here, those locks are uncontended.
//!
//! # How to read it
//!
//! Times are the benchmark thread's CPU time ([`benches::clock`]), per dump
//! of all 10,000 tasks, including freeing the result. Compare
//! `dump().to_string()` with the 5 ms target and with the peers' text
//! dumps; `dump()` alone shows how much of it is the snapshot and how much
//! the formatting. `cargo run -p benches --bin summary` prints the ratios.

use std::fmt::Write as _;
use std::hint::black_box;

use await_tree::Registry;
use benches::clock::BenchClock;
use benches::dump_population::{self, populate};
use benches::{DUMP_DEPTH, DUMP_TASKS, names};
use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};

mod async_backtrace_chain {
    use benches::park;

    macro_rules! level {
        ($name:ident => $callee:ident) => {
            /// One level: awaits the level below.
            #[async_backtrace::framed]
            pub async fn $name() {
                $callee().await
            }
        };
    }
    benches::chain!(9, level, park);
}

mod await_tree_chain {
    use await_tree::InstrumentAwait;
    use benches::park;

    /// The span the task root is registered with: `l9` and where it is.
    pub const ROOT_SPAN: &str = concat!("l9 at ", file!(), ":", line!());

    macro_rules! level {
        // `l1` awaits the leaf uninstrumented: with the root span, the
        // tree then has one node per level, 9 in all, like the other chains.
        (l1 => $callee:ident) => {
            /// The innermost level: awaits the leaf.
            pub async fn l1() {
                $callee().await
            }
        };
        ($name:ident => $callee:ident) => {
            /// One level: awaits the level below as an await-tree span
            /// naming the callee and the line of this `.await`.
            pub async fn $name() {
                $callee()
                    .instrument_await(concat!(stringify!($callee), " at ", file!(), ":", line!()))
                    .await
            }
        };
    }
    benches::chain!(9, level, park);
}

/// The async-stack population's premise (see
/// [`dump_population::check_async_stack`]), and its text. Returns the text
/// of one task.
fn check_async_stack() -> String {
    let dump = async_stack::dump();
    dump_population::check_async_stack(&dump);
    let text = dump.to_string();
    assert_eq!(text.matches(" [async]\n").count(), DUMP_TASKS * DUMP_DEPTH);
    assert_eq!(
        text.matches("awaiting at ").count(),
        DUMP_TASKS * DUMP_DEPTH
    );
    eprintln!("async-stack text dump: {} bytes", text.len());
    // The streamed JSON is a whole dump of the same tasks.
    let mut json = Vec::new();
    let summary = async_stack::dump::write_json(&mut json).expect("writing to a Vec");
    assert_eq!(summary.tasks, DUMP_TASKS);
    let json = String::from_utf8(json).expect("JSON is UTF-8");
    let streamed = async_stack::TaskDump::from_json(&json).expect("the streamed JSON reads back");
    assert_eq!(streamed.tasks.len(), DUMP_TASKS);
    eprintln!("async-stack JSON dump: {} bytes", dump.to_json().len());
    dump.tasks[0].to_string()
}

/// The async-backtrace population's premise. Returns one task's tree.
fn check_async_backtrace() -> String {
    assert_eq!(async_backtrace::tasks().count(), DUMP_TASKS);
    let text = async_backtrace::taskdump_tree(false);
    assert!(!text.contains("POLLING"));
    assert_eq!(text.matches("╼ ").count(), DUMP_TASKS * DUMP_DEPTH);
    eprintln!("async-backtrace text dump: {} bytes", text.len());
    async_backtrace::tasks()
        .next()
        .expect("a task")
        .pretty_tree(false)
}

/// await-tree's text dump: every tree with its key, as one string.
fn await_tree_text(registry: &Registry) -> String {
    let mut out = String::new();
    for (key, tree) in registry.collect_all() {
        writeln!(out, "[{key}]\n{tree}").expect("writing to a String");
    }
    out
}

/// The await-tree population's premise. Returns one task's tree.
fn check_await_tree(registry: &Registry) -> String {
    let all = registry.collect_all();
    assert_eq!(all.len(), DUMP_TASKS);
    for (_, tree) in &all {
        assert_eq!(tree.to_string().lines().count(), DUMP_DEPTH);
    }
    let text = await_tree_text(registry);
    assert_eq!(
        text.matches(await_tree_chain::ROOT_SPAN).count(),
        DUMP_TASKS
    );
    eprintln!("await-tree text dump: {} bytes", text.len());
    all[0].1.to_string()
}

fn dump(c: &mut Criterion<BenchClock>) {
    let mut group = c.benchmark_group(names::DUMP);
    // Milliseconds per iteration: a fixed number of iterations per sample.
    group.sampling_mode(SamplingMode::Flat).sample_size(20);

    let rt = dump_population::populate_async_stack();
    eprintln!("one async-stack task:\n{}", check_async_stack());
    group.bench_function(names::DUMP_SNAPSHOT, |b| {
        b.iter(async_stack::dump);
    });
    group.bench_function(names::DUMP_TEXT, |b| {
        b.iter(|| async_stack::dump().to_string());
    });
    group.bench_function(names::DUMP_TO_TEXT, |b| {
        b.iter(|| async_stack::dump().to_text(false));
    });
    group.bench_function(names::DUMP_WRITE_TEXT, |b| {
        b.iter(|| async_stack::dump::write_text(std::io::sink()).map(|s| s.tasks));
    });
    group.bench_function(names::DUMP_JSON, |b| {
        b.iter(|| async_stack::dump().to_json());
    });
    let taken = async_stack::dump();
    group.bench_function(names::DUMP_TO_JSON, |b| {
        b.iter(|| taken.to_json());
    });
    drop(taken);
    group.bench_function(names::DUMP_WRITE_JSON, |b| {
        b.iter(|| async_stack::dump::write_json(std::io::sink()).map(|s| s.tasks));
    });
    drop(rt);
    assert_eq!(
        async_stack::dump().tasks.len(),
        0,
        "tasks outlived the runtime"
    );

    let rt = populate(|_| drop(tokio::spawn(async_backtrace_chain::l9())));
    eprintln!("one async-backtrace task:\n{}", check_async_backtrace());
    group.bench_function(names::AB_TASKDUMP, |b| {
        b.iter(|| async_backtrace::taskdump_tree(black_box(false)));
    });
    drop(rt);
    assert_eq!(async_backtrace::tasks().count(), 0);

    let registry = Registry::new(await_tree::Config::default());
    let rt = populate(|i| {
        let root = registry.register(i, await_tree_chain::ROOT_SPAN);
        drop(tokio::spawn(root.instrument(await_tree_chain::l9())));
    });
    eprintln!("one await-tree task:\n{}", check_await_tree(&registry));
    group.bench_function(names::AT_COLLECT, |b| {
        b.iter(|| registry.collect_all());
    });
    group.bench_function(names::AT_COLLECT_TEXT, |b| {
        b.iter(|| await_tree_text(&registry));
    });
    drop(rt);
    assert!(registry.collect_all().is_empty());

    group.finish();
}

criterion_group! {
    name = benches;
    config = benches::clock::criterion();
    targets = dump
}
criterion_main!(benches);
