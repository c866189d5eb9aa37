//! `ticker_cpu`: what the `async-stack-clock` thread costs, in CPU time.
//!
//! Task roots stamp their state with a time that a background thread keeps
//! in one atomic word (see `async_stack`'s "Cost" docs). The benches read
//! the benchmark thread's CPU time, so they do not see that thread. This
//! binary measures it on its own (Linux only: it reads the thread's
//! `/proc/self/task/<tid>/stat`):
//!
//! 1. **busy**: a traced task is polled in a loop for `--seconds` (default
//!    3): the ticker ticks every 4 ms for the whole time;
//! 2. **idle**: then nothing polls for the same time plus 2 s: the ticker
//!    parks after about a second without reads.
//!
//! It prints the ticker's CPU time (user + system) per second of each
//! phase, and how many polls the busy phase ran.
//!
//! ```text
//! cargo run -p benches --profile bench --bin ticker_cpu -- --seconds 3
//! ```

use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use async_stack::traced_async;

#[traced_async]
async fn spin(until: Instant) -> u64 {
    let mut polls = 0;
    while Instant::now() < until {
        polls += 1;
        benches::yield_leaf(1).await;
    }
    polls
}

/// The ticker thread's user + system CPU time, in clock ticks
/// (`sysconf(_SC_CLK_TCK)` per second), if it runs.
fn ticker_ticks() -> Option<u64> {
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = entry.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        // Linux keeps the first 15 bytes of a thread's name.
        if comm.trim() != "async-stack-clo" {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // Fields after the `(comm)`; utime and stime are fields 14 and 15.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        return Some(utime + stime);
    }
    None
}

fn main() {
    let seconds: u64 = match std::env::args().skip(1).collect::<Vec<_>>()[..] {
        [] => 3,
        [ref flag, ref n] if flag == "--seconds" => match n.parse() {
            Ok(n) if (1..=600).contains(&n) => n,
            _ => {
                eprintln!("--seconds takes a whole number from 1 to 600, not {n:?}");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!("usage: ticker_cpu [--seconds N]");
            std::process::exit(2);
        }
    };
    // SAFETY: `sysconf` only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let busy = Duration::from_secs(seconds);

    let mut fut = pin!(spin(Instant::now() + busy));
    let mut cx = Context::from_waker(Waker::noop());
    // The first poll starts the ticker.
    let before = loop {
        if fut.as_mut().poll(&mut cx).is_ready() {
            break None;
        }
        if let Some(t) = ticker_ticks() {
            break Some(t);
        }
    };
    let Some(before) = before else {
        eprintln!("no async-stack-clock thread found (not Linux, or it did not start)");
        std::process::exit(1);
    };
    let start = Instant::now();
    let polls = loop {
        if let Poll::Ready(n) = fut.as_mut().poll(&mut cx) {
            break n;
        }
    };
    let busy_s = start.elapsed().as_secs_f64();
    let after_busy = ticker_ticks().unwrap_or(before);

    let idle = busy + Duration::from_secs(2);
    std::thread::sleep(idle);
    let after_idle = ticker_ticks().unwrap_or(after_busy);

    let ms = |ticks: u64| ticks as f64 * 1000.0 / hz;
    println!("| phase | seconds | ticker CPU, ms | ticker CPU per second |");
    println!("|---|---:|---:|---:|");
    println!(
        "| busy ({polls} polls of a traced task) | {busy_s:.1} | {:.0} | {:.2} ms ({:.3} %) |",
        ms(after_busy - before),
        ms(after_busy - before) / busy_s,
        ms(after_busy - before) / busy_s / 10.0
    );
    println!(
        "| idle (no polls) | {:.1} | {:.0} | {:.2} ms ({:.3} %) |",
        idle.as_secs_f64(),
        ms(after_idle - after_busy),
        ms(after_idle - after_busy) / idle.as_secs_f64(),
        ms(after_idle - after_busy) / idle.as_secs_f64() / 10.0
    );
    println!("(clock ticks of 1/{hz} s: figures below 1000/{hz} ms per phase read as 0)");
}
