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
//! Work that runs on other threads (the `multi_thread` group of the `spawn`
//! bench, whose tasks run on two tokio workers while the benchmark thread
//! waits) is invisible to the thread's clock. Those benches read the
//! *process's* CPU time instead (`CLOCK_PROCESS_CPUTIME_ID`: every thread of
//! this process, no other process), through [`criterion_process`]. It sums
//! the CPU time of all threads, so it measures cost, not latency: two
//! workers busy for 1 ms each count as 2 ms.
//!
//! [`BenchClock`] is the criterion [`Measurement`]; [`now`] reads the
//! thread clock for `iter_custom` loops ([`crate::Timed`]). The clock is
//! chosen once per process, on first use.

use std::sync::OnceLock;
use std::time::Duration;

use criterion::Criterion;
use criterion::measurement::{Measurement, ValueFormatter, WallTime};

/// Whose CPU time a [`BenchClock`] counts (ignored with `BENCH_CLOCK=wall`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// The calling thread only (`CLOCK_THREAD_CPUTIME_ID`).
    #[default]
    Thread,
    /// Every thread of this process (`CLOCK_PROCESS_CPUTIME_ID`).
    Process,
}

/// Whether `BENCH_CLOCK=wall` was given, read once per process.
fn wall() -> bool {
    static WALL_CLOCK: OnceLock<bool> = OnceLock::new();
    *WALL_CLOCK.get_or_init(|| match std::env::var("BENCH_CLOCK").as_deref() {
        Ok("wall") => true,
        Ok("cpu") | Err(_) => false,
        Ok(other) => panic!("BENCH_CLOCK={other:?}: expected \"cpu\" or \"wall\""),
    })
}

/// The clock for `scope` chosen for this process (`BENCH_CLOCK`, default
/// `cpu`).
fn clock_id(scope: Scope) -> libc::clockid_t {
    match (wall(), scope) {
        (true, _) => libc::CLOCK_MONOTONIC,
        (false, Scope::Thread) => libc::CLOCK_THREAD_CPUTIME_ID,
        (false, Scope::Process) => libc::CLOCK_PROCESS_CPUTIME_ID,
    }
}

/// A short name of the thread clock in use, for reports.
pub fn name() -> &'static str {
    name_of(Scope::Thread)
}

/// A short name of the clock `scope` reads, for reports.
pub fn name_of(scope: Scope) -> &'static str {
    match clock_id(scope) {
        libc::CLOCK_MONOTONIC => "wall (CLOCK_MONOTONIC)",
        libc::CLOCK_PROCESS_CPUTIME_ID => "process CPU time (CLOCK_PROCESS_CPUTIME_ID)",
        _ => "thread CPU time (CLOCK_THREAD_CPUTIME_ID)",
    }
}

/// The current reading of the benchmark thread clock.
pub fn now() -> Duration {
    read(Scope::Thread)
}

/// The current reading of the clock for `scope`.
pub fn read(scope: Scope) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the
    // call, and `clock_id` returns one of three clocks Linux always provides.
    let rc = unsafe { libc::clock_gettime(clock_id(scope), &mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    let secs = u64::try_from(ts.tv_sec).expect("clock before its epoch");
    let nanos = u32::try_from(ts.tv_nsec).expect("tv_nsec out of range");
    Duration::new(secs, nanos)
}

/// Criterion's [`Measurement`] for the clock of [`BenchClock::scope`]; the
/// default is the thread clock, [`now`].
#[derive(Debug, Clone, Copy, Default)]
pub struct BenchClock {
    /// Whose CPU time is counted.
    pub scope: Scope,
}

/// Used only for its formatter (durations print the same on either clock).
static WALL: WallTime = WallTime;

impl Measurement for BenchClock {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        read(self.scope)
    }

    fn end(&self, start: Duration) -> Duration {
        read(self.scope).saturating_sub(start)
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

/// The criterion configuration of every bench: [`BenchClock`] on the thread
/// clock, everything else criterion's default or from the command line.
pub fn criterion() -> Criterion<BenchClock> {
    with_scope(Scope::Thread)
}

/// The same on the process clock, for benches whose work runs on threads
/// other than the benchmark thread.
pub fn criterion_process() -> Criterion<BenchClock> {
    with_scope(Scope::Process)
}

fn with_scope(scope: Scope) -> Criterion<BenchClock> {
    eprintln!("benchmark clock: {}", name_of(scope));
    Criterion::default().with_measurement(BenchClock { scope })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process clock counts another thread's work; the thread clock
    /// does not (unless `BENCH_CLOCK=wall`, where both are wall time).
    #[test]
    fn process_clock_counts_other_threads() {
        if wall() {
            return;
        }
        let spin = || {
            let start = read(Scope::Thread);
            while read(Scope::Thread) - start < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
        };
        let (thread0, process0) = (now(), read(Scope::Process));
        std::thread::spawn(spin).join().unwrap();
        let (thread, process) = (now() - thread0, read(Scope::Process) - process0);
        assert!(process >= Duration::from_millis(30), "{process:?}");
        assert!(thread < Duration::from_millis(10), "{thread:?}");
    }
}
