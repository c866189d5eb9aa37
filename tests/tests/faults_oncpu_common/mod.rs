//! Helpers shared by the `faults_oncpu_*` tests: each scenario runs in a
//! child process of its own (on-CPU sampling is one session per process,
//! its signals reach every thread, and a scenario that crashes must not
//! take the other tests down), a traced task that burns a given amount of
//! its thread's CPU time, and a wait for a thread's on-CPU timer.
//!
//! Every test file that uses this module declares
//! `mod faults_oncpu_common;`; each uses a different subset of it, hence
//! the `dead_code` allowance.

#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

use async_stack::sampler::__faults;
use async_stack::traced_async;

/// The environment variable that tells a child process which scenario to
/// run.
const CHILD: &str = "ASYNC_STACK_FAULTS_ONCPU_CHILD";

/// Runs `scenario` in a child process of this test binary (the test named
/// `name`, which must be the calling test), and asserts that the child
/// passed: it neither crashed nor failed an assertion. In the child,
/// runs `scenario` itself.
pub fn in_child(name: &str, scenario: impl FnOnce()) {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        scenario();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .expect("the test binary runs again as a child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("child {name}: {}\n{stdout}\n{stderr}", out.status);
    assert!(
        out.status.success(),
        "scenario {name} failed in its child process: {} (a signal means the process \
         crashed)\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "the child ran the scenario {name}: {stdout}"
    );
}

/// The calling thread's CPU time.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Burns `cpu` of the calling thread's CPU time.
#[inline(never)]
pub fn burn(cpu: Duration) {
    let end = thread_cpu() + cpu;
    let mut x = 1u64;
    while thread_cpu() < end {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    std::hint::black_box(x);
}

/// A traced task root: polling it lists the thread for on-CPU sampling.
#[traced_async]
pub async fn traced_burn(cpu: Duration) {
    burn(cpu);
}

/// Polls a traced task on the calling thread (so that it is listed for
/// on-CPU sampling), then waits until the running sampler has given the
/// thread its timer. Panics after `limit`.
pub fn wait_until_sampled(limit: Duration) {
    futures::executor::block_on(traced_burn(Duration::ZERO));
    let start = Instant::now();
    while !__faults::on_cpu_sampled() {
        assert!(
            start.elapsed() < limit,
            "the sampler gave this thread no timer in {limit:?}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Burns CPU in a traced task, 20 ms at a time, until the calling
/// thread's undrained on-CPU backlog satisfies `enough` (queued samples,
/// samples lost). The sampler must not be draining (see
/// `__faults::hold_on_cpu_drain`), else the backlog may never build up.
/// Panics after `limit` of CPU time. However loaded the machine (the
/// kernel raises fewer signals per CPU second then), the backlog is what
/// the test asked for.
pub fn burn_until(enough: impl Fn(usize, u64) -> bool, limit: Duration) {
    let end = thread_cpu() + limit;
    futures::executor::block_on(async_stack::TracedExt::traced_named(
        async {
            loop {
                let (queued, lost) = __faults::on_cpu_backlog();
                if enough(queued, lost) {
                    return;
                }
                assert!(
                    thread_cpu() < end,
                    "backlog {queued} queued, {lost} lost after {limit:?} of CPU time"
                );
                burn(Duration::from_millis(20));
            }
        },
        "burn_until",
    ));
}
