//! Fault injection: on-CPU samples lost in full buffers, and signals that
//! never arrive, are counted in `Stats::signals_lost` exactly once, in the
//! session they happen in. Each scenario runs in a child process of its
//! own.

#![cfg(target_os = "linux")]

mod faults_oncpu_common;

use std::time::Duration;

use async_stack::sampler::{__faults, Sampler};
use faults_oncpu_common::{burn_until, in_child, traced_burn, wait_until_sampled};

fn start() -> Sampler {
    Sampler::builder()
        .frequency_hz(250)
        .on_cpu(true)
        .start()
        .expect("on-CPU sampling starts")
}

/// Burns CPU in a traced task while the sampler thread drains nothing,
/// until the thread's 64-sample buffer has lost `lost` samples, then lets
/// the sampler drain.
fn overflow(lost: u64) {
    __faults::hold_on_cpu_drain(true);
    burn_until(|_, l| l >= lost, Duration::from_secs(60));
    __faults::hold_on_cpu_drain(false);
}

/// A session overflows its thread's buffer; the next session, on the
/// same thread (and so the same buffer), loses nothing and must report
/// nothing lost. Before the fix the reused buffer carried its old count
/// into the new session.
#[test]
fn a_reused_buffer_does_not_carry_its_losses_into_the_next_session() {
    in_child(
        "a_reused_buffer_does_not_carry_its_losses_into_the_next_session",
        || {
            let first = start();
            wait_until_sampled(Duration::from_secs(10));
            overflow(1);
            let first = *first.stop().stats();
            println!("first {first:?}");
            assert!(first.signals_lost > 0, "the buffer overflowed: {first:?}");

            let second = start();
            wait_until_sampled(Duration::from_secs(10));
            futures::executor::block_on(traced_burn(Duration::from_millis(100)));
            let second = *second.stop().stats();
            println!("second {second:?}");
            assert_eq!(second.signals_lost, 0, "{second:?}");
        },
    );
}

/// A thread overflows its buffer and exits; then another overflows its
/// own, losing fewer. Both losses count. Before the fix the exited
/// thread's losses left the sum, which hid the second thread's.
#[test]
fn losses_of_a_thread_that_exits_do_not_hide_later_losses() {
    in_child(
        "losses_of_a_thread_that_exits_do_not_hide_later_losses",
        || {
            let sampler = start();
            std::thread::spawn(|| {
                wait_until_sampled(Duration::from_secs(10));
                overflow(20);
            })
            .join()
            .unwrap();
            // The first drain symbolises, which takes a while in a debug
            // build: wait for it.
            let start = std::time::Instant::now();
            let mid = loop {
                let s = sampler.stats();
                if s.signals > 0 || start.elapsed() > Duration::from_secs(60) {
                    break s;
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            assert!(mid.signals > 0, "the exited thread's samples: {mid:?}");
            std::thread::spawn(|| {
                wait_until_sampled(Duration::from_secs(10));
                overflow(5);
            })
            .join()
            .unwrap();
            let end = *sampler.stop().stats();
            println!("after the first thread {mid:?}\nat the end {end:?}");
            assert!(mid.signals_lost > 0, "{mid:?}");
            assert!(
                end.signals_lost > mid.signals_lost,
                "the second thread's losses count: {end:?}"
            );
        },
    );
}

/// A thread that blocks every signal while it burns CPU gets no on-CPU
/// signal: the sampler counts the signals that did not arrive. Before the
/// fix nothing was counted.
#[test]
fn signals_that_never_arrive_are_counted() {
    in_child("signals_that_never_arrive_are_counted", || {
        let sampler = start();
        std::thread::spawn(|| {
            wait_until_sampled(Duration::from_secs(10));
            // SAFETY: a full set, and a valid out-pointer.
            unsafe {
                let mut all = std::mem::zeroed::<libc::sigset_t>();
                libc::sigfillset(&mut all);
                assert_eq!(
                    libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut()),
                    0
                );
            }
            futures::executor::block_on(traced_burn(Duration::from_millis(600)));
            // Time for the sampler to look, before the thread exits.
            std::thread::sleep(Duration::from_millis(300));
        })
        .join()
        .unwrap();
        let s = *sampler.stop().stats();
        println!("{s:?}");
        // 600 ms at 250 Hz: 150 periods, less the first 100 ms or eight
        // periods that tell a late signal from a missing one.
        assert!(
            s.signals_lost >= 50,
            "signals that never arrived are counted: {s:?}"
        );
    });
}
