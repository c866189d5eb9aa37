//! Which native frames an on-CPU sample keeps above its async frames, in
//! every build: the synchronous code the innermost async fn calls, and
//! nothing that the async frames already stand for (the bodies of the
//! chain's fns, inlined into one another and into the executor in an
//! optimised build) or that lies below them (the executor).
//!
//! `scripts/test.sh` runs this file in a debug build, in a release build
//! with line tables only, and in a release build with no debug info at
//! all, where no native frame shows a `Traced::poll` and the sampler cuts
//! the native frames where the innermost body's code runs. There, before
//! that cut, a sample taken in the leaf's own loop showed the function the
//! whole chain was inlined into (`…::top::{{closure}}`, or tokio's poll)
//! as a native frame above `leaf`. With line tables only, the leaf's body,
//! inlined into its poll, is named as full debug info names it
//! (`…::leaf::{{closure}}`), never `{async_block#0}`.
//!
//! The tests take turns (`SERIAL`): one on-CPU session per process.

#![cfg(target_os = "linux")]

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_stack::sampler::{MAX_FREQUENCY_HZ, Sampler};
use async_stack::traced_async;

static SERIAL: Mutex<()> = Mutex::new(());

/// Synchronous work the leaf calls: a function of its own in every build.
#[inline(never)]
fn sync_helper(n: u64) -> u64 {
    let mut x = n;
    for i in 0..20_000 {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    x
}

/// The chain a test samples: `top` awaits `middle` awaits `leaf`, which
/// burns CPU until told to stop. One module per executor: a build without
/// debug info knows where one copy of a body's code runs, the one that
/// reached an `.await` first, and an executor that inlines the chain into
/// a function of its own (`block_on` does, into `LocalKey::with`) makes
/// another copy (see the crate's "Stack accuracy").
macro_rules! chain {
    ($module:ident) => {
        mod $module {
            use super::*;

            #[traced_async]
            pub async fn leaf(stop: &'static AtomicBool) -> u64 {
                tokio::task::yield_now().await;
                let mut acc = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Half the time in the helper, half in the leaf's own
                    // code.
                    acc = acc.wrapping_add(sync_helper(acc));
                    for i in 0..20_000 {
                        acc = std::hint::black_box(acc.wrapping_mul(17).wrapping_add(i));
                    }
                }
                acc
            }

            #[traced_async]
            pub async fn middle(stop: &'static AtomicBool) -> u64 {
                leaf(stop).await
            }

            #[traced_async]
            pub async fn top(stop: &'static AtomicBool) -> u64 {
                middle(stop).await
            }
        }
    };
}

chain!(spawned); // SPAWNED
chain!(blocked); // BLOCKED

/// `module::function at file:line:column`, as folded stacks print an
/// async frame of a chain: code from a macro takes its invocation's
/// location (`marker`'s line, column 1).
fn label(module: &str, function: &str, marker: &str) -> String {
    let line = common::marker_line("tests/sampler_native_frames.rs", marker);
    format!(
        "sampler_native_frames::{module}::{function} at {}:{line}:1",
        file!()
    )
}

/// Samples on-CPU while `run` drives `module`'s `top` on a thread of its own, and
/// returns the on-CPU folded stacks that reach the leaf's loop: for each,
/// the native frames above the async ones, outermost first, and its
/// sample count.
fn leaf_samples(
    module: &str,
    run: fn(&'static AtomicBool) -> u64,
    stop: &'static AtomicBool,
) -> Vec<(Vec<String>, u64)> {
    stop.store(false, Ordering::Relaxed);
    let sampler = Sampler::builder()
        .frequency_hz(MAX_FREQUENCY_HZ)
        .on_cpu(true)
        .start()
        .expect("on-CPU sampling starts on Linux");
    let worker = std::thread::spawn(move || run(stop));
    std::thread::sleep(Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    let profile = sampler.stop();
    let mut folded = Vec::new();
    profile.write_folded_by(&mut folded, |w| w.cpu_ns).unwrap();
    let folded = String::from_utf8(folded).unwrap();

    // The chain the leaf's loop runs under.
    let marker = module.to_uppercase();
    let chain = [
        format!("sampler_native_frames::{module}::top"),
        label(module, "top", &marker),
        label(module, "middle", &marker),
        label(module, "leaf", &marker),
    ];
    let mut out = Vec::new();
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        if !frames.contains(&chain[3].as_str()) {
            continue;
        }
        assert_eq!(frames[..4], chain, "{line}");
        let natives = frames[4..].iter().map(|f| f.to_string()).collect();
        out.push((natives, count.parse().unwrap()));
    }
    out
}

/// What every leaf sample of `module`'s chain must show: no native frame
/// of a body the async frames stand for (nor of the other chain), or of
/// the executor; nothing of the leaf's above the helper when it runs; and
/// samples in both.
fn check(module: &str, samples: &[(Vec<String>, u64)]) {
    let other = if module == "spawned" {
        "blocked"
    } else {
        "spawned"
    };
    let mut in_helper = 0;
    let mut in_leaf = 0;
    for (natives, count) in samples {
        for f in natives {
            // Line tables name the leaf's body `{async_block#0}`; the
            // export names it as full debug info does.
            assert!(
                !f.starts_with("{async_block#"),
                "a body named short: {natives:?}"
            );
            for stood_for in [
                format!("sampler_native_frames::{module}::top"),
                format!("sampler_native_frames::{module}::middle"),
                format!("sampler_native_frames::{other}::"),
                "tokio::".into(),
                "futures_executor::".into(),
                "std::thread::".into(),
            ] {
                assert!(
                    !f.starts_with(&stood_for),
                    "a native frame {f:?} above the async frames: {natives:?}\n{samples:#?}"
                );
            }
        }
        match natives
            .iter()
            .position(|f| f.starts_with("sampler_native_frames::sync_helper"))
        {
            Some(at) => {
                // Above it only what it inlines: nothing of the leaf's.
                assert!(
                    natives[..at].iter().all(|f| !f.contains("leaf")),
                    "{natives:?}"
                );
                in_helper += count;
            }
            None => in_leaf += count,
        }
    }
    assert!(in_helper > 0, "no sample in the helper: {samples:#?}");
    assert!(
        in_leaf > 0,
        "no sample in the leaf's own loop: {samples:#?}"
    );
}

#[test]
fn a_spawned_task_keeps_only_what_its_leaf_calls() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    static STOP: AtomicBool = AtomicBool::new(false);
    let samples = leaf_samples(
        "spawned",
        |stop| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(async { tokio::spawn(spawned::top(stop)).await.unwrap() })
        },
        &STOP,
    );
    check("spawned", &samples);
}

#[test]
fn a_task_under_block_on_keeps_only_what_its_leaf_calls() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    static STOP: AtomicBool = AtomicBool::new(false);
    let samples = leaf_samples(
        "blocked",
        |stop| futures::executor::block_on(blocked::top(stop)),
        &STOP,
    );
    check("blocked", &samples);
}
