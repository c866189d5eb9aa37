//! Fault injection: threads that come and go under on-CPU sampling.
//!
//! A thread's timer and sample buffer must go back to the sampler when
//! the thread exits, with the samples it took since the last drain:
//! memory and sampling stay the same after any number of threads. Each
//! scenario runs in a child process of its own.

#![cfg(target_os = "linux")]

mod faults_oncpu_common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use async_stack::sampler::{__faults, Sampler};
use faults_oncpu_common::{burn_until, in_child, traced_burn, wait_until_sampled};

/// Threads alive at once during the churn.
const BATCH: usize = 50;

/// 10,000 short-lived threads each poll a traced task and live until the
/// sampler has given them a timer. Then a new thread that burns 400 ms of
/// CPU must get its signals, and the buffers allocated must stay within
/// what the threads alive at once need. Before the fix each exited
/// thread kept its buffer: after 4,096 of them no thread was sampled
/// again.
#[test]
fn ten_thousand_short_lived_threads_leave_sampling_working_and_memory_bounded() {
    in_child(
        "ten_thousand_short_lived_threads_leave_sampling_working_and_memory_bounded",
        || {
            let sampler = Sampler::builder()
                .frequency_hz(1000)
                .on_cpu(true)
                .start()
                .expect("on-CPU sampling starts");
            for _ in 0..10_000 / BATCH {
                let threads: Vec<_> = (0..BATCH)
                    .map(|_| std::thread::spawn(|| wait_until_sampled(Duration::from_secs(30))))
                    .collect();
                for t in threads {
                    t.join().unwrap();
                }
            }
            let allocated = __faults::on_cpu_buffers_allocated();
            let before = sampler.stats();
            std::thread::spawn(|| {
                futures::executor::block_on(traced_burn(Duration::ZERO));
                // Time for the sampler to give this thread its timer.
                std::thread::sleep(Duration::from_millis(50));
                futures::executor::block_on(traced_burn(Duration::from_millis(400)));
            })
            .join()
            .unwrap();
            let profile = sampler.stop();
            let s = profile.stats();
            println!("buffers allocated {allocated}, before the burn {before:?}, at the end {s:?}");
            assert!(
                allocated <= 4 * BATCH,
                "{allocated} buffers for {BATCH} threads alive at once"
            );
            assert!(
                s.signals > before.signals,
                "the thread that burned 400 ms of CPU was sampled: {s:?}"
            );
            // Some may be lost in a full buffer while the first drain
            // symbolises (slow in a debug build): counted, never more
            // than the burn could raise (400 ms at 1000 Hz).
            assert!(s.signals_lost <= 400, "{s:?}");
        },
    );
}

/// Threads that burn CPU and exit while the sampler thread is held back
/// (as a descheduled sampler thread would be), each leaving 20 samples in
/// its buffer: every one is counted once the sampler catches up. Before
/// the fix they were thrown away with the exited threads' buffers.
#[test]
fn samples_of_threads_that_exit_before_the_next_drain_are_counted() {
    in_child(
        "samples_of_threads_that_exit_before_the_next_drain_are_counted",
        || {
            const THREADS: usize = 4;
            // Samples each thread leaves in its buffer (which holds 64).
            const PER_THREAD: usize = 20;
            let sampler = Sampler::builder()
                .frequency_hz(100)
                .on_cpu(true)
                .start()
                .expect("on-CPU sampling starts");
            let ready = Arc::new(Barrier::new(THREADS + 1));
            let threads: Vec<_> = (0..THREADS)
                .map(|_| {
                    let ready = ready.clone();
                    std::thread::spawn(move || {
                        wait_until_sampled(Duration::from_secs(30));
                        ready.wait();
                        ready.wait();
                        burn_until(|queued, _| queued >= PER_THREAD, Duration::from_secs(60));
                    })
                })
                .collect();
            ready.wait();
            __faults::hold_on_cpu_drain(true);
            let before = sampler.stats();
            ready.wait();
            for t in threads {
                t.join().unwrap();
            }
            __faults::hold_on_cpu_drain(false);
            std::thread::sleep(Duration::from_millis(100));
            let profile = sampler.stop();
            let s = profile.stats();
            println!("before the burn {before:?}, at the end {s:?}");
            let taken = s.signals + s.signals_lost - before.signals - before.signals_lost;
            assert!(
                taken >= (THREADS * PER_THREAD) as u64,
                "{taken} signals counted, where the exited threads left {} in their buffers: \
                 {s:?}",
                THREADS * PER_THREAD
            );
        },
    );
}
