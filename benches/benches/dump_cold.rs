//! `dump_cold`: the first dump of 10,000 tasks × 9 frames in a fresh
//! process, streamed (`write_text`) against whole (`dump().to_string()`):
//! time, and bytes allocated.
//!
//! # What runs
//!
//! Each iteration starts a new process, the `dump_cold_probe` binary (see
//! its docs): it builds the 10,000 idle tasks of
//! [`benches::dump_population`], the same as the `dump` bench's, then
//! takes its first dump and reports, as JSON, the dump's time and what it
//! allocated. Starting the process and building the tasks are outside the
//! measurement; only the dump is timed, in the process itself.
//!
//! Two criterion groups, over the same two variants:
//!
//! - `dump_cold` (time, on the benchmark clock of the probe: its thread's
//!   CPU time, page faults included, unless `BENCH_CLOCK=wall`):
//!   - `first write_text(sink)`: `async_stack::dump::write_text` into a
//!     sink, the first dump of the process;
//!   - `first dump().to_string()`: `async_stack::dump().to_string()`, the
//!     first dump of the process (the probe run with `--first to_string`).
//! - `dump_cold_alloc`: the same two, but the "time" criterion reports is
//!   the bytes allocated during the dump (every `alloc` and `realloc` of
//!   the probe's counting allocator), printed in KB or MB.
//!
//! # How to read it
//!
//! The targets are for the streamed dump: at most 5 ms, and at most 2 MB
//! allocated. The whole dump is the baseline of the same run: the ratio
//! says what streaming saves on the first dump, where every page a dump
//! allocates is new to the process and faults in (the warm `dump` bench
//! cannot see that cost). Allocation is deterministic, so its interval is
//! narrow. `cargo run -p benches --bin summary` prints the table and the
//! ratios.

use std::process::Command;
use std::time::Duration;

use benches::clock::BenchClock;
use benches::names;
use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use serde_json::Value;

/// The first run a probe reports: `(ns, allocated bytes)`.
fn probe(first: &str) -> (u64, u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_dump_cold_probe"))
        .args(["--first", first])
        .output()
        .expect("cannot run dump_cold_probe");
    assert!(
        out.status.success(),
        "dump_cold_probe failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("probe output is JSON");
    let run = &report["runs"][0];
    assert_eq!(run["what"], first, "{report}");
    let field = |name: &str| {
        run[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name} in {report}"))
    };
    (field("ns"), field("allocated_bytes"))
}

/// The variants: benchmark id and the probe's `--first`.
const VARIANTS: [(&str, &str); 2] = [
    (names::COLD_WRITE_TEXT, "write_text"),
    (names::COLD_TO_STRING, "to_string"),
];

fn cold_time(c: &mut Criterion<BenchClock>) {
    let mut group = c.benchmark_group(names::DUMP_COLD);
    // A process per iteration: a few iterations per sample.
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    for (id, first) in VARIANTS {
        // Show one report before the measurement.
        let (ns, bytes) = probe(first);
        eprintln!("{id}: {:.2} ms, {bytes} bytes allocated", ns as f64 / 1e6);
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| Duration::from_nanos(probe(first).0))
                    .sum()
            });
        });
    }
    group.finish();
}

/// A criterion measurement whose values are bytes, for `iter_custom`
/// routines that return what they allocated.
struct Bytes;

impl Measurement for Bytes {
    type Intermediate = ();
    type Value = u64;

    fn start(&self) {}

    fn end(&self, _: ()) -> u64 {
        unreachable!("Bytes is only measured through iter_custom")
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &BytesFormatter
    }
}

/// Prints bytes in KB or MB (10^3, 10^6).
struct BytesFormatter;

impl ValueFormatter for BytesFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (scale, unit) = if typical >= 1e6 {
            (1e-6, "MB")
        } else {
            (1e-3, "KB")
        };
        for v in values {
            *v *= scale;
        }
        unit
    }

    fn scale_throughputs(&self, _: f64, _: &Throughput, _: &mut [f64]) -> &'static str {
        "n/a"
    }

    fn scale_for_machines(&self, _: &mut [f64]) -> &'static str {
        "B"
    }
}

fn cold_alloc(c: &mut Criterion<Bytes>) {
    let mut group = c.benchmark_group(names::DUMP_COLD_ALLOC);
    // The same every time: ten processes are plenty.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(1));
    for (id, first) in VARIANTS {
        group.bench_function(id, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| probe(first).1).sum());
        });
    }
    group.finish();
}

criterion_group! {
    name = time;
    config = benches::clock::criterion();
    targets = cold_time
}
criterion_group! {
    name = alloc;
    config = Criterion::default().with_measurement(Bytes);
    targets = cold_alloc
}
criterion_main!(time, alloc);
