//! `capture`: what taking a backtrace costs, against `std::backtrace`.
//!
//! # What runs
//!
//! Every variant runs inside the same depth-8 `#[traced_async]` chain
//! ([`benches::traced8`], polled with a no-op waker, no runtime), so the
//! native stack being walked and the eight async frames are identical. The
//! timed loop runs inside one poll of the leaf (`iter_custom`); building and
//! polling the chain is outside the measurement.
//!
//! - `async-stack capture`: `async_stack::backtrace()` and drop. Addresses
//!   only, no symbols: the cost a sampler or a "log the stack" call pays.
//! - `async-stack capture+format warm`: the same, then `format!("{bt}")`,
//!   after criterion's warm-up has filled the process-wide symbol cache.
//! - `std force_capture`: `std::backtrace::Backtrace::force_capture()` and
//!   drop (std also resolves lazily, so this is its unwind alone).
//! - `std force_capture+to_string`: the same, then `.to_string()`. std's
//!   resolution is not cached between backtraces, only the parsed debug info
//!   is, so every iteration resolves every frame again.
//!
//! The *cold* case (the first resolution in a process, which loads and
//! parses debug info) cannot be repeated in one process, so it is not here:
//! `cargo run -p benches --profile bench --bin cold_resolve` times it in
//! fresh processes.
//!
//! # How to read it
//!
//! Times are the benchmark thread's CPU time ([`benches::clock`];
//! `BENCH_CLOCK=wall` for wall time), so other processes on the machine
//! inflate them less.
//!
//! Times are per backtrace. Compare `async-stack capture` with
//! `std force_capture` (both walk the same native stack; async-stack also
//! follows the async frame chain) and `async-stack capture+format warm` with
//! `std force_capture+to_string`. `cargo run -p benches --bin summary`
//! prints the ratios.

use std::backtrace::Backtrace;
use std::hint::black_box;

use benches::clock::BenchClock;
use benches::{names, time_in_traced_chain};
use criterion::{Criterion, criterion_group, criterion_main};

fn async_stack_capture() {
    drop(black_box(async_stack::backtrace()));
}

fn async_stack_capture_format() {
    let bt = async_stack::backtrace();
    black_box(format!("{bt}"));
}

fn std_capture() {
    drop(black_box(Backtrace::force_capture()));
}

fn std_capture_to_string() {
    black_box(Backtrace::force_capture().to_string());
}

fn capture(c: &mut Criterion<BenchClock>) {
    let mut group = c.benchmark_group(names::CAPTURE);
    let variants: [(&str, fn()); 4] = [
        (names::CAPTURE_ONLY, async_stack_capture),
        (names::CAPTURE_RESOLVE_WARM, async_stack_capture_format),
        (names::STD_CAPTURE_ONLY, std_capture),
        (names::STD_CAPTURE_RESOLVE, std_capture_to_string),
    ];
    for (name, work) in variants {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| time_in_traced_chain(iters, work));
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = benches::clock::criterion();
    targets = capture
}
criterion_main!(benches);
