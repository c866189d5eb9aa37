//! `memory`: resident bytes per live, suspended tokio task, async-stack
//! against an untraced control and its peers.
//!
//! # What runs
//!
//! Each sample runs the `mem_probe` binary (`benches/src/bin/mem_probe.rs`)
//! in a fresh process: it spawns [`TASKS`] (100,000) tasks on a
//! `current_thread` runtime, each suspended at the bottom of a chain of 3
//! or 16 async fns, and reports the resident memory they added, per task
//! (see [`benches::memory`] for the population and how it is read). One
//! criterion group, `memory`, holds every variant × depth, so the control
//! and the three libraries are measured in the same run, from the same
//! binary:
//!
//! - `control`: plain async fns, `tokio::spawn`.
//! - `async-stack`: `#[async_stack::traced_async]` fns,
//!   `async_stack::tokio::spawn`.
//! - `async-backtrace`: `#[async_backtrace::framed]` fns, `tokio::spawn`.
//! - `await-tree`: a keyed `Registry::register` root, `instrument_await` on
//!   every level below it.
//!
//! The measurement ([`ResidentBytes`]) is not a time: the value of one
//! iteration is the probe's `bytes_per_task`, so criterion's estimates
//! (and the `time:` line it prints) are bytes per live task. Eleven
//! processes per benchmark (one to warm up, then one per sample, at
//! criterion's minimum of 10 samples) keep the bench at about 25 s of CPU
//! time; criterion warns that it cannot complete 10 samples in the target
//! time, which is expected. The figures barely move between processes
//! (the table shows their spread), so more samples would add nothing.
//!
//! # How to read it
//!
//! ```text
//! added bytes per task = bytes_per_task(variant) - bytes_per_task(control)
//! ```
//!
//! is what instrumenting a task costs in memory; the target (issue 20) is
//! that async-stack adds at most what async-backtrace adds, at depth 3.
//! The bench prints a table of every figure at the end: the median over
//! its probes of the resident bytes per task, the bytes added over the
//! control, the size of the future handed to `tokio::spawn` (tokio's task
//! cell grows with it in 128-byte steps), and the heap bytes and blocks
//! per task the population holds (bytes asked for, before the allocator's
//! headers and padding), then the ratios and the target.
//! `cargo run -p benches --bin summary` prints the same table from
//! criterion's estimates (without the probe's details).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use benches::memory::{self, DEPTHS, Detail, Figures, ProbeReport, TASKS, Variant};
use benches::names;
use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};

/// Resident bytes per live task, as reported by one `mem_probe` process.
///
/// Only `iter_custom` can use it: nothing is measured around a closure.
#[derive(Debug, Clone, Copy, Default)]
struct ResidentBytes;

impl Measurement for ResidentBytes {
    type Intermediate = ();
    type Value = f64;

    fn start(&self) {
        panic!("ResidentBytes comes from a probe process: use iter_custom");
    }

    fn end(&self, _: ()) -> f64 {
        panic!("ResidentBytes comes from a probe process: use iter_custom");
    }

    fn add(&self, a: &f64, b: &f64) -> f64 {
        a + b
    }

    fn zero(&self) -> f64 {
        0.0
    }

    fn to_f64(&self, value: &f64) -> f64 {
        *value
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &BytesFormatter
    }
}

/// Prints bytes unscaled: per-task figures are hundreds to thousands.
struct BytesFormatter;

impl ValueFormatter for BytesFormatter {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "B"
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        _t: &Throughput,
        _values: &mut [f64],
    ) -> &'static str {
        "B"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "B"
    }
}

/// Runs one probe process and returns its report.
fn run_probe(variant: Variant, depth: usize) -> ProbeReport {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_mem_probe"));
    ProbeReport::run(exe, variant, depth, TASKS).unwrap_or_else(|e| panic!("{e}"))
}

/// Every report of this run, by variant and depth.
type Reports = BTreeMap<(Variant, usize), Vec<ProbeReport>>;

fn memory(c: &mut Criterion<ResidentBytes>) {
    let reports = RefCell::new(Reports::new());
    let mut group = c.benchmark_group(names::MEMORY);
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        // One probe to warm up, then one per sample: a target time shorter
        // than any probe makes criterion run each sample once.
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_millis(1));
    for depth in DEPTHS {
        for variant in Variant::ALL {
            group.bench_with_input(
                BenchmarkId::new(variant.name(), depth),
                &depth,
                |b, &depth| {
                    b.iter_custom(|iters| {
                        (0..iters)
                            .map(|_| {
                                let report = run_probe(variant, depth);
                                let bytes = report.bytes_per_task;
                                reports
                                    .borrow_mut()
                                    .entry((variant, depth))
                                    .or_default()
                                    .push(report);
                                bytes
                            })
                            .sum()
                    });
                },
            );
        }
    }
    group.finish();
    print!(
        "{}",
        memory::table(&|v, d| figures(&reports.borrow(), v, d))
    );
}

/// The medians of the reports of `variant` at `depth`.
fn figures(reports: &Reports, variant: Variant, depth: usize) -> Figures {
    let Some(all) = reports.get(&(variant, depth)) else {
        return Figures::default();
    };
    let median = |f: fn(&ProbeReport) -> f64| {
        let mut v: Vec<f64> = all.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let range = all.iter().map(|r| r.bytes_per_task);
    Figures {
        bytes_per_task: Some(median(|r| r.bytes_per_task)),
        detail: Some(Detail {
            min_max: (
                range.clone().fold(f64::INFINITY, f64::min),
                range.fold(f64::NEG_INFINITY, f64::max),
            ),
            future_bytes: all[0].future_bytes,
            heap_bytes_per_task: median(|r| r.heap_bytes_per_task),
            allocs_per_task: median(|r| r.allocs_per_task),
            probes: all.len(),
        }),
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ResidentBytes);
    targets = memory
}
criterion_main!(benches);
