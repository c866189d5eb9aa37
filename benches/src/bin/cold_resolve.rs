//! `cold_resolve`: the first capture + symbol resolution in a fresh process.
//!
//! The `capture` bench can only measure warm resolution: async-stack's symbol
//! cache is process-wide and cannot be cleared, and std's parsed debug info
//! is cached the same way. The cold case, the first `format!("{bt}")` in a
//! process, is what a program that prints one backtrace when it hangs pays.
//!
//! This binary re-runs itself `--runs N` times (default 10) per variant, each
//! child doing, inside the depth-8 traced chain of [`benches::traced8`]:
//! one capture, one format (cold), then a second capture + format (warm).
//! It prints a markdown table of the median, min and max over the children.
//!
//! Run it with the profile the benches use, so the debug info is the same
//! (`line-tables-only`):
//!
//! ```text
//! cargo run -p benches --profile bench --bin cold_resolve -- --runs 10
//! ```
//!
//! `--show` prints the async-stack backtrace the benches capture instead.
//!
//! Times are read on the benchmark clock ([`benches::clock`]: thread CPU
//! time unless `BENCH_CLOCK=wall`).
//!
//! Read it as: `cold format` is the one-off price of the first resolution;
//! `warm capture+format` is what every later backtrace costs (the `capture`
//! bench measures that one precisely). The OS page cache is warm after the
//! first child, so these are "fresh process", not "fresh machine", figures.

use std::backtrace::Backtrace;
use std::fmt::Display;
use std::process::{Command, ExitCode};

use benches::{clock, time_in_traced_chain};

const VARIANTS: [&str; 2] = ["async-stack", "std"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--child", "async-stack"] => child(async_stack_once),
        ["--child", "std"] => child(std_once),
        ["--show"] => child(show),
        [] => parent(10),
        ["--runs", n] => match n.parse() {
            Ok(n) if n > 0 => parent(n),
            _ => usage(),
        },
        _ => usage(),
    }
}

fn usage() -> ExitCode {
    eprintln!("usage: cold_resolve [--runs N | --show]");
    ExitCode::FAILURE
}

/// Runs `work` once inside the traced chain; `work` prints its timings.
fn child(work: fn()) -> ExitCode {
    time_in_traced_chain(1, work);
    ExitCode::SUCCESS
}

/// Prints `capture_ns format_ns warm_ns lines` for one variant.
fn report<B: Display>(capture: impl Fn() -> B) {
    let start = clock::now();
    let bt = capture();
    let captured = clock::now();
    let text = bt.to_string();
    let formatted = clock::now();
    let warm = capture().to_string();
    let warm_done = clock::now();
    assert_eq!(text.lines().count(), warm.lines().count());
    println!(
        "{} {} {} {}",
        (captured - start).as_nanos(),
        (formatted - captured).as_nanos(),
        (warm_done - formatted).as_nanos(),
        text.lines().count(),
    );
}

fn async_stack_once() {
    report(async_stack::backtrace);
}

fn std_once() {
    report(Backtrace::force_capture);
}

/// Prints the async-stack backtrace the benches capture, to check what they
/// measure: eight `traced8::lN` async frames spliced into the native stack.
fn show() {
    println!("{}", async_stack::backtrace());
}

fn parent(runs: usize) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("cold_resolve: cannot find own executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "fresh processes per variant: {runs}; clock: {}; times are median (min..max)\n",
        clock::name()
    );
    println!("| variant | cold capture | cold format | warm capture+format | lines |");
    println!("|---|---|---|---|---|");
    for variant in VARIANTS {
        let mut samples: Vec<[u128; 4]> = Vec::with_capacity(runs);
        for _ in 0..runs {
            let out = match Command::new(&exe).args(["--child", variant]).output() {
                Ok(out) if out.status.success() => out,
                Ok(out) => {
                    eprintln!(
                        "cold_resolve: child {variant} failed: {}\n{}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    );
                    return ExitCode::FAILURE;
                }
                Err(e) => {
                    eprintln!("cold_resolve: cannot run child: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let text = String::from_utf8_lossy(&out.stdout);
            let fields: Vec<u128> = text
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            match fields[..] {
                [a, b, c, d] => samples.push([a, b, c, d]),
                _ => {
                    eprintln!("cold_resolve: unexpected child output {text:?}");
                    return ExitCode::FAILURE;
                }
            }
        }
        let column = |i: usize| {
            let mut values: Vec<u128> = samples.iter().map(|s| s[i]).collect();
            values.sort_unstable();
            values
        };
        let time = |i: usize| {
            let v = column(i);
            format!(
                "{} ({}..{})",
                human(v[v.len() / 2]),
                human(v[0]),
                human(v[v.len() - 1])
            )
        };
        println!(
            "| {variant} | {} | {} | {} | {} |",
            time(0),
            time(1),
            time(2),
            column(3)[runs / 2]
        );
    }
    ExitCode::SUCCESS
}

/// Formats nanoseconds with a readable unit.
fn human(ns: u128) -> String {
    let ns = ns as f64;
    if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}
