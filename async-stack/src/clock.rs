//! The clock of task state timestamps: one relaxed load on the poll path.
//!
//! Task roots stamp every state change (running, idle, scheduled), twice
//! per poll, so the clock sits on the hot path of every task. Even the
//! cheapest system clock (`CLOCK_MONOTONIC_COARSE` through the vDSO) costs
//! several nanoseconds per read, more than a whole instrumented level. So a
//! background thread, `async-stack-clock`, stores the time in milliseconds
//! in one atomic word every [`TICK`], and the poll path reads that word.
//!
//! - **Resolution**: one tick (4 ms), the same as the coarse system clock
//!   on most kernels (`CONFIG_HZ=250`): ample for "idle 2.3s" and for stall
//!   thresholds measured in milliseconds. A stamp lags the real time by at
//!   most a tick, plus however long the ticker waits for a CPU.
//! - **Started lazily**, by the first read, so a process without tasks has
//!   no such thread.
//! - **Parks when unused**: the first read after each tick marks the word
//!   (one read-modify-write per tick in the whole process, not per read). A
//!   ticker that sees no mark for [`IDLE_TICKS`] ticks in a row clears the
//!   word and parks; the next read finds it cleared, reads the system clock
//!   itself and wakes the ticker.
//! - **After `fork`** the child has no ticker: a fork handler clears the
//!   word, and every read in the child falls back to the system clock.
//! - **Opt-out**: with the environment variable `ASYNC_STACK_CLOCK=system`
//!   (read once, case-insensitive) no thread is started and every stamp
//!   reads the system clock: a few nanoseconds more per task poll, no
//!   background wake-ups. `ticker` (or no variable) is the default; any
//!   other value is reported once on stderr and the default is used.
//!
//! Readers that need the time now rather than the latest tick (dumps, the
//! stall watchdog) call [`system_ms`].

// std's atomics, not `crate::shim`'s: the clock word is a `static` (loom's
// atomics have no `const` constructor), written by one thread and read as
// a plain value; no protocol rests on its ordering for loom to explore.
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::Thread;
use std::time::Duration;

/// How often the ticker stores the time.
pub(crate) const TICK: Duration = Duration::from_millis(4);

/// Ticks without a read after which the ticker parks (about a second).
pub(crate) const IDLE_TICKS: u32 = 250;

/// `(ms << 1) | read`: the time of the latest tick, and whether anything
/// read it since. `0`: no ticker is running (not started yet, parked, or a
/// forked child).
pub(crate) static NOW: AtomicU64 = AtomicU64::new(0);
const READ: u64 = 1;

/// The ticker thread, once started (`None` if it could not be spawned, or
/// `ASYNC_STACK_CLOCK=system` asked for none).
static TICKER: OnceLock<Option<Thread>> = OnceLock::new();

/// The environment variable that selects the clock.
pub(crate) const CLOCK_VAR: &str = "ASYNC_STACK_CLOCK";

/// What `ASYNC_STACK_CLOCK` asks for: `Ok(true)` for the ticker, `Ok(false)`
/// for the system clock, `Err(message)` for a value it does not know.
pub(crate) fn ticker_wanted(value: Option<&std::ffi::OsStr>) -> Result<bool, String> {
    let Some(value) = value else {
        return Ok(true);
    };
    match value.to_str().map(str::to_ascii_lowercase).as_deref() {
        Some("ticker") => Ok(true),
        Some("system") => Ok(false),
        _ => Err(format!(
            "async-stack: {CLOCK_VAR}={value:?} is neither `ticker` nor `system`; using `ticker`"
        )),
    }
}

/// Milliseconds since an arbitrary, fixed, process-wide origin, as of the
/// latest tick. Never `0`.
#[inline(always)]
pub(crate) fn now_ms() -> u64 {
    let word = NOW.load(Ordering::Relaxed);
    if word & READ != 0 {
        return word >> 1;
    }
    now_ms_slow(word)
}

/// The first read after a tick (marks it), or any read while no ticker
/// runs (reads the system clock, and starts or wakes the ticker).
#[cold]
#[inline(never)]
fn now_ms_slow(word: u64) -> u64 {
    if word != 0 {
        NOW.fetch_or(READ, Ordering::Relaxed);
        return word >> 1;
    }
    let now = system_ms();
    if let Some(ticker) = TICKER.get_or_init(start_ticker) {
        ticker.unpark();
    }
    now
}

fn start_ticker() -> Option<Thread> {
    match ticker_wanted(std::env::var_os(CLOCK_VAR).as_deref()) {
        Ok(true) => {}
        Ok(false) => return None,
        // Never `eprintln!`: this runs inside a task's poll, and must not
        // panic when stderr is a closed pipe.
        Err(message) => crate::warn::warn(format_args!("{message}")),
    }
    #[cfg(unix)]
    {
        extern "C" fn forget_ticker_in_child() {
            NOW.store(0, Ordering::Relaxed);
        }
        // SAFETY: registers a handler that only stores to an atomic, which
        // is async-signal-safe, as a forked child's handlers must be.
        unsafe {
            libc::pthread_atfork(None, None, Some(forget_ticker_in_child));
        }
    }
    std::thread::Builder::new()
        .name("async-stack-clock".into())
        .spawn(tick)
        .ok()
        .map(|handle| handle.thread().clone())
}

/// The ticker: stores the time every [`TICK`]; parks after [`IDLE_TICKS`]
/// ticks that nothing read, until a read wakes it.
fn tick() {
    let mut unread = 0;
    loop {
        let before = NOW.swap(system_ms() << 1, Ordering::Relaxed);
        unread = if before & READ == 0 { unread + 1 } else { 0 };
        if unread >= IDLE_TICKS {
            NOW.store(0, Ordering::Relaxed);
            std::thread::park();
            unread = 0;
            continue;
        }
        std::thread::sleep(TICK);
    }
}

/// Milliseconds since the same origin as [`now_ms`], read from the system
/// clock now. Never `0`.
pub(crate) fn system_ms() -> u64 {
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
                .saturating_mul(1000)
                .saturating_add(ts.tv_nsec as u64 / 1_000_000)
                .max(1);
        }
        fallback_ms()
    }
    #[cfg(not(target_os = "linux"))]
    {
        fallback_ms()
    }
}

fn fallback_ms() -> u64 {
    use std::time::Instant;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_millis())
        .unwrap_or(u64::MAX >> 2)
        .saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_variable_accepts_two_values_and_reports_others() {
        use std::ffi::OsStr;
        assert_eq!(ticker_wanted(None), Ok(true));
        assert_eq!(ticker_wanted(Some(OsStr::new("ticker"))), Ok(true));
        assert_eq!(ticker_wanted(Some(OsStr::new("System"))), Ok(false));
        assert_eq!(
            ticker_wanted(Some(OsStr::new("sys"))),
            Err("async-stack: ASYNC_STACK_CLOCK=\"sys\" is neither `ticker` nor `system`; using `ticker`".to_owned())
        );
        assert!(ticker_wanted(Some(OsStr::new(""))).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let bad = ticker_wanted(Some(OsStr::from_bytes(b"sys\xfftem"))).unwrap_err();
            assert!(bad.contains("\"sys\\xFFtem\""), "{bad}");
        }
    }

    #[test]
    fn ticks_are_monotonic_and_never_ahead_of_the_system_clock() {
        let mut last = now_ms();
        assert_ne!(last, 0);
        for _ in 0..20 {
            std::thread::sleep(TICK);
            let ticked = now_ms();
            assert!(ticked >= last, "{ticked} < {last}");
            assert!(ticked <= system_ms(), "tick ahead of the system clock");
            last = ticked;
        }
    }
}
