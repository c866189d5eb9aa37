//! A cheap monotonic clock for task state timestamps.
//!
//! Task roots stamp every state change (running, idle, scheduled), so the
//! clock sits on the per-poll path of every task. On Linux it reads
//! `CLOCK_MONOTONIC_COARSE` through the vDSO (a few nanoseconds, resolution
//! of one scheduler tick, typically 1-4 ms), which is ample for "idle 2.3s"
//! and for stall thresholds measured in milliseconds. Elsewhere it falls
//! back to `std::time::Instant`.

/// Nanoseconds since an arbitrary, fixed, process-wide origin.
#[inline]
pub(crate) fn now_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec and the clock id is a
        // constant the kernel supports since Linux 2.6.32.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        if rc == 0 {
            return (ts.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(ts.tv_nsec as u64);
        }
        fallback()
    }
    #[cfg(not(target_os = "linux"))]
    {
        fallback()
    }
}

fn fallback() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
