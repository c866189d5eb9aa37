//! The clock every benchmark reads: by default this thread's CPU time.
//!
//! The benchmarks run on a 2-core machine shared with builds and tests. A
//! wall clock counts the time the benchmark thread spends descheduled while
//! a compiler runs, which inflated every figure by 1.5-2.5× (and the
//! differences between variants with it) in the first runs. Thread CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) counts only the time the thread ran: it is
//! still disturbed by caches the other processes evict, but not by their
//! share of the cores. On a quiet machine the two agree; set
//! `BENCH_CLOCK=wall` to use `CLOCK_MONOTONIC` instead.
//!
//! [`BenchClock`] is the criterion [`Measurement`]; [`now`] reads the same
//! clock for `iter_custom` loops ([`crate::Timed`]). The clock is chosen once
//! per process, on first use.

use std::sync::OnceLock;
use std::time::Duration;

use criterion::Criterion;
use criterion::measurement::{Measurement, ValueFormatter, WallTime};

/// The clock chosen for this process (`BENCH_CLOCK`, default `cpu`).
fn clock_id() -> libc::clockid_t {
    static ID: OnceLock<libc::clockid_t> = OnceLock::new();
    *ID.get_or_init(|| match std::env::var("BENCH_CLOCK").as_deref() {
        Ok("wall") => libc::CLOCK_MONOTONIC,
        Ok("cpu") | Err(_) => libc::CLOCK_THREAD_CPUTIME_ID,
        Ok(other) => panic!("BENCH_CLOCK={other:?}: expected \"cpu\" or \"wall\""),
    })
}

/// A short name of the clock in use, for reports.
pub fn name() -> &'static str {
    if clock_id() == libc::CLOCK_MONOTONIC {
        "wall (CLOCK_MONOTONIC)"
    } else {
        "thread CPU time (CLOCK_THREAD_CPUTIME_ID)"
    }
}

/// The current reading of the benchmark clock.
pub fn now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the
    // call, and `clock_id()` is one of two clocks Linux always provides.
    let rc = unsafe { libc::clock_gettime(clock_id(), &mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    let secs = u64::try_from(ts.tv_sec).expect("clock before its epoch");
    let nanos = u32::try_from(ts.tv_nsec).expect("tv_nsec out of range");
    Duration::new(secs, nanos)
}

/// Criterion's [`Measurement`] for [`now`]'s clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct BenchClock;

/// Used only for its formatter (durations print the same on either clock).
static WALL: WallTime = WallTime;

impl Measurement for BenchClock {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        now()
    }

    fn end(&self, start: Duration) -> Duration {
        now().saturating_sub(start)
    }

    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

/// The criterion configuration of every bench: [`BenchClock`], everything
/// else criterion's default or from the command line.
pub fn criterion() -> Criterion<BenchClock> {
    eprintln!("benchmark clock: {}", name());
    Criterion::default().with_measurement(BenchClock)
}
