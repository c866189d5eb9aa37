//! `dump_cold_probe`: the first dump of 10,000 tasks in a fresh process,
//! streamed and whole: time and bytes allocated.
//!
//! The `dump` bench measures dumps warm: criterion repeats them in one
//! process, so the code, the site tables and the allocator's free memory
//! are all ready after the first. A program that dumps on a signal, a stall
//! or a panic usually dumps once, cold: every page the dump allocates is
//! new to the process and faults in. This binary measures that case. It
//! builds the population of [`benches::dump_population`] (10,000 idle
//! tasks × 9 traced frames, on a `current_thread` tokio runtime), then
//! takes two dumps, the first one cold:
//!
//! - `write_text`: `async_stack::dump::write_text` into a sink that only
//!   counts the bytes (the streaming dump: one task at a time);
//! - `to_string`: `async_stack::dump().to_string()` (the whole dump, then
//!   its text), and the string freed.
//!
//! By default `write_text` is first; `--first to_string` swaps them. It
//! prints one line of JSON:
//!
//! ```text
//! {"tasks":10000,"depth":9,"clock":"thread CPU time (CLOCK_THREAD_CPUTIME_ID)",
//!  "runs":[{"what":"write_text","ns":..,"wall_ns":..,"allocated_bytes":..,
//!           "allocations":..,"peak_bytes":..,"page_faults":..,"text_bytes":..},
//!          {"what":"to_string",..}]}
//! ```
//!
//! - `ns`: the dump's time on the benchmark clock ([`benches::clock`]:
//!   this thread's CPU time, which counts the page faults the dump takes,
//!   unless `BENCH_CLOCK=wall`); `wall_ns` the wall time;
//! - `allocated_bytes`, `allocations`: bytes and calls of every `alloc`
//!   and `realloc` (its new size) during the dump, counted by this
//!   binary's global allocator (a wrapper of [`System`]);
//! - `peak_bytes`: the most bytes the dump held allocated at once;
//! - `page_faults`: the minor page faults the thread took during the dump
//!   (`getrusage(RUSAGE_THREAD)`), pages new to the process;
//! - `text_bytes`: the length of the text.
//!
//! After both dumps it checks the premise (outside the measurements): the
//! dump holds exactly the 10,000 tasks, each with its 9 frames at their
//! exact lines, and the streamed dump wrote all 10,000.
//!
//! The `dump_cold` bench runs it once per iteration; to run it by hand:
//!
//! ```text
//! cargo run -p benches --profile bench --bin dump_cold_probe [-- --first to_string]
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use benches::{DUMP_DEPTH, DUMP_TASKS, clock, dump_population};

/// [`System`], counting what is allocated.
struct Counting;

/// Bytes asked for by `alloc` and `realloc` (new size), ever.
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
/// Calls of `alloc` and `realloc`, ever.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated and not freed.
static LIVE: AtomicU64 = AtomicU64::new(0);
/// The most `LIVE` reached since the last [`Counts::start`].
static PEAK: AtomicU64 = AtomicU64::new(0);

fn allocated(bytes: usize) {
    let bytes = bytes as u64;
    ALLOCATED.fetch_add(bytes, Ordering::Relaxed);
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn freed(bytes: usize) {
    LIVE.fetch_sub(bytes as u64, Ordering::Relaxed);
}

// SAFETY: every call goes to `System` unchanged; the counters are atomics,
// which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size());
        // SAFETY: the caller's obligations are `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        freed(layout.size());
        // SAFETY: `ptr` came from `System` with `layout`: every allocation
        // of this allocator does.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        freed(layout.size());
        allocated(new_size);
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The counters at one instant.
#[derive(Clone, Copy)]
struct Counts {
    bytes: u64,
    calls: u64,
    live: u64,
}

impl Counts {
    /// The counters now.
    fn read() -> Counts {
        Counts {
            bytes: ALLOCATED.load(Ordering::Relaxed),
            calls: ALLOCATIONS.load(Ordering::Relaxed),
            live: LIVE.load(Ordering::Relaxed),
        }
    }

    /// The counters now, and a new peak from here.
    fn start() -> Counts {
        let now = Counts::read();
        PEAK.store(now.live, Ordering::Relaxed);
        now
    }
}

/// A sink that counts what it is given.
struct CountingSink(u64);

impl Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One measured dump.
struct Run {
    what: &'static str,
    time: Duration,
    wall: Duration,
    bytes: u64,
    calls: u64,
    peak: u64,
    faults: u64,
    text: u64,
    tasks: usize,
}

/// Page faults this thread has taken (minor: a fresh page mapped in).
fn page_faults() -> u64 {
    // SAFETY: `rusage` is plain data, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage` for the duration of the
    // call, and `RUSAGE_THREAD` is a valid `who` on Linux.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(rc, 0, "getrusage failed");
    u64::try_from(usage.ru_minflt).unwrap_or(0)
}

impl Run {
    fn json(&self) -> String {
        format!(
            "{{\"what\":\"{}\",\"ns\":{},\"wall_ns\":{},\"allocated_bytes\":{},\"allocations\":{},\"peak_bytes\":{},\"page_faults\":{},\"text_bytes\":{}}}",
            self.what,
            self.time.as_nanos(),
            self.wall.as_nanos(),
            self.bytes,
            self.calls,
            self.peak,
            self.faults,
            self.text
        )
    }
}

/// A dump to measure: returns the text length and the tasks it saw.
type Dump = fn() -> (u64, usize);

/// Measures `dump`.
fn measure(what: &'static str, dump: Dump) -> Run {
    let before = Counts::start();
    let faults = page_faults();
    let (start, wall) = (clock::now(), Instant::now());
    let (text, tasks) = dump();
    let (time, wall) = (clock::now().saturating_sub(start), wall.elapsed());
    let faults = page_faults() - faults;
    let peak = PEAK.load(Ordering::Relaxed);
    let after = Counts::read();
    Run {
        what,
        time,
        wall,
        bytes: after.bytes - before.bytes,
        calls: after.calls - before.calls,
        peak: peak.saturating_sub(before.live),
        faults,
        text,
        tasks,
    }
}

/// The streamed dump.
fn write_text() -> (u64, usize) {
    let mut sink = CountingSink(0);
    let summary = async_stack::dump::write_text(&mut sink).expect("a sink never fails");
    (sink.0, summary.tasks)
}

/// The whole dump, then its text.
fn to_string() -> (u64, usize) {
    let dump = async_stack::dump();
    let text = dump.to_string();
    (text.len() as u64, dump.tasks.len())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stream_first = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] | ["--first", "write_text"] => true,
        ["--first", "to_string"] => false,
        _ => {
            eprintln!("usage: dump_cold_probe [--first write_text|to_string]");
            return ExitCode::FAILURE;
        }
    };
    let rt = dump_population::populate_async_stack();
    let variants: [(&'static str, Dump); 2] =
        [("write_text", write_text), ("to_string", to_string)];
    let order = if stream_first { [0, 1] } else { [1, 0] };
    // Measured one after the other, the first in a process that has not
    // dumped before; nothing runs between them.
    let [first, second] = order.map(|i| measure(variants[i].0, variants[i].1));
    // The premise, outside the measurements.
    for run in [&first, &second] {
        assert_eq!(run.tasks, DUMP_TASKS, "{} saw every task", run.what);
    }
    dump_population::check_async_stack(&async_stack::dump());
    println!(
        "{{\"tasks\":{DUMP_TASKS},\"depth\":{DUMP_DEPTH},\"clock\":\"{}\",\"runs\":[{},{}]}}",
        clock::name(),
        first.json(),
        second.json()
    );
    drop(rt);
    ExitCode::SUCCESS
}
