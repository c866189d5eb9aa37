//! Fault injection: another profiler in the same process. pprof-rs, the
//! profiler Rust services commonly run, drives `SIGPROF` from
//! `setitimer`, installs its own handler for it, and leaves the signal
//! ignored when its guard drops. On-CPU sampling must work before,
//! during and after it, and pprof-rs must keep working too. Each scenario
//! runs in a child process of its own.

#![cfg(target_os = "linux")]

mod faults_oncpu_common;

use std::time::Duration;

use async_stack::sampler::{Sampler, Stats};
use faults_oncpu_common::{burn, in_child, traced_burn, wait_until_sampled};

/// A pprof-rs profiler at 250 Hz.
fn pprof_guard() -> pprof::ProfilerGuard<'static> {
    pprof::ProfilerGuardBuilder::default()
        .frequency(250)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .expect("pprof-rs starts")
}

/// Samples pprof-rs took.
fn pprof_samples(guard: &pprof::ProfilerGuard<'_>) -> usize {
    let report = guard.report().build().expect("a pprof-rs report");
    report.data.values().sum::<isize>() as usize
}

/// An on-CPU session at 250 Hz while a traced task on a new thread burns
/// `cpu`, running `meanwhile` on the burning thread first.
fn session(cpu: Duration) -> Stats {
    let sampler = Sampler::builder()
        .frequency_hz(250)
        .on_cpu(true)
        .start()
        .expect("on-CPU sampling starts");
    std::thread::spawn(move || {
        wait_until_sampled(Duration::from_secs(10));
        futures::executor::block_on(traced_burn(cpu));
    })
    .join()
    .unwrap();
    let s = *sampler.stop().stats();
    println!("{s:?}");
    s
}

/// A session, then pprof-rs for half a second, then another session:
/// both sessions get their signals. Before the fix the second got none
/// (pprof-rs left `SIGPROF` ignored) and counted nothing lost.
#[test]
fn on_cpu_sampling_works_after_pprof_ran() {
    in_child("on_cpu_sampling_works_after_pprof_ran", || {
        let first = session(Duration::from_millis(400));
        assert!(first.signals > 0, "{first:?}");
        let guard = pprof_guard();
        burn(Duration::from_millis(500));
        assert!(pprof_samples(&guard) > 0, "pprof-rs sampled");
        drop(guard);
        let second = session(Duration::from_millis(400));
        assert!(second.signals > 0, "the session after pprof-rs: {second:?}");
    });
}

/// pprof-rs runs for the whole session: the session starts, gets its
/// signals, and pprof-rs gets its own. Before the fix the session refused
/// to start (`SIGPROF` had pprof-rs's handler).
#[test]
fn on_cpu_sampling_starts_and_works_while_pprof_runs() {
    in_child("on_cpu_sampling_starts_and_works_while_pprof_runs", || {
        let guard = pprof_guard();
        let s = session(Duration::from_millis(400));
        assert!(s.signals > 0, "the session beside pprof-rs: {s:?}");
        assert!(pprof_samples(&guard) > 0, "pprof-rs sampled");
        drop(guard);
        let after = session(Duration::from_millis(400));
        assert!(after.signals > 0, "the session after pprof-rs: {after:?}");
    });
}

/// pprof-rs starts and stops in the middle of a session: the session's
/// signals keep arriving while pprof-rs runs and after it stops. Before
/// the fix pprof-rs's handler took them, then they were ignored.
#[test]
fn on_cpu_sampling_goes_on_while_pprof_starts_and_stops() {
    in_child(
        "on_cpu_sampling_goes_on_while_pprof_starts_and_stops",
        || {
            let sampler = Sampler::builder()
                .frequency_hz(250)
                .on_cpu(true)
                .start()
                .expect("on-CPU sampling starts");
            let (to_burner, commands) = std::sync::mpsc::channel::<Duration>();
            let (to_main, done) = std::sync::mpsc::channel::<()>();
            let burner = std::thread::spawn(move || {
                wait_until_sampled(Duration::from_secs(10));
                for cpu in commands {
                    futures::executor::block_on(traced_burn(cpu));
                    to_main.send(()).unwrap();
                }
            });
            let tick = Duration::from_millis(50);
            let guard = pprof_guard();
            to_burner.send(Duration::from_millis(400)).unwrap();
            done.recv().unwrap();
            std::thread::sleep(tick);
            let during = sampler.stats();
            assert!(pprof_samples(&guard) > 0, "pprof-rs sampled");
            drop(guard);
            to_burner.send(Duration::from_millis(400)).unwrap();
            done.recv().unwrap();
            drop(to_burner);
            burner.join().unwrap();
            let end = *sampler.stop().stats();
            println!("while pprof-rs ran {during:?}\nat the end {end:?}");
            assert!(during.signals > 0, "signals while pprof-rs ran: {during:?}");
            assert!(
                end.signals > during.signals,
                "signals after pprof-rs stopped: {end:?}"
            );
        },
    );
}
