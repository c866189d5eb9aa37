//! Fault injection: the sampler thread fails to start, or panics. The
//! on-CPU session it held must end with it, so that a later
//! `on_cpu(true)` sampler starts and samples. Each scenario runs in a
//! child process of its own (one on-CPU session per process).

#![cfg(target_os = "linux")]

mod faults_oncpu_common;

use std::time::Duration;

use async_stack::sampler::__faults::Fault;
use async_stack::sampler::{__faults, Sampler};
use faults_oncpu_common::{in_child, traced_burn, wait_until_sampled};

/// Starts an on-CPU sampler, burns 300 ms of CPU in a traced task on a
/// new thread, and asserts that the burn was sampled.
fn sample_a_burn() {
    let sampler = Sampler::builder()
        .frequency_hz(250)
        .on_cpu(true)
        .start()
        .expect("a later on-CPU sampler starts");
    std::thread::spawn(|| {
        wait_until_sampled(Duration::from_secs(10));
        futures::executor::block_on(traced_burn(Duration::from_millis(300)));
    })
    .join()
    .unwrap();
    let s = *sampler.stop().stats();
    println!("{s:?}");
    assert!(s.signals > 0, "the later session was sampled: {s:?}");
}

/// The sampler thread cannot be started: `start` returns the error, and
/// the next on-CPU sampler starts. Before the fix the failed start left
/// the process's on-CPU session claimed, and every later `on_cpu(true)`
/// failed with `AlreadyExists`.
#[test]
fn a_sampler_thread_that_fails_to_start_leaves_on_cpu_sampling_available() {
    in_child(
        "a_sampler_thread_that_fails_to_start_leaves_on_cpu_sampling_available",
        || {
            let err = Sampler::builder()
                .on_cpu(true)
                .inject_fault(Fault::SpawnFails)
                .start()
                .expect_err("the injected spawn failure");
            assert!(err.to_string().contains("injected"), "{err}");
            sample_a_burn();
        },
    );
}

/// The sampler thread panics with its session's timers live: `stop`
/// passes the panic on, and the next on-CPU sampler starts and samples.
#[test]
fn a_sampler_thread_that_panics_leaves_on_cpu_sampling_available() {
    in_child(
        "a_sampler_thread_that_panics_leaves_on_cpu_sampling_available",
        || {
            let sampler = Sampler::builder()
                .frequency_hz(250)
                .on_cpu(true)
                .inject_fault(Fault::PanicsOnStop)
                .start()
                .expect("on-CPU sampling starts");
            std::thread::spawn(|| {
                wait_until_sampled(Duration::from_secs(10));
                futures::executor::block_on(traced_burn(Duration::from_millis(100)));
            })
            .join()
            .unwrap();
            let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sampler.stop()));
            assert!(
                stopped.is_err(),
                "stop passes the sampler thread's panic on"
            );
            let allocated = __faults::on_cpu_buffers_allocated();
            sample_a_burn();
            assert_eq!(
                __faults::on_cpu_buffers_allocated(),
                allocated,
                "the later session reused the buffer the panicked one held"
            );
        },
    );
}
