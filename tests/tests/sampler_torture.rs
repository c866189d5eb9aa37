//! Torture tests of the sampler: hot loops sampled at the highest rate,
//! wall-clock and on-CPU, where every reported stack must be one the
//! program really had. Exact shapes, no tolerance for a torn or mixed
//! stack; drops are counted and printed (the closing note reports them).
//!
//! Each test runs its workload on its own threads; the tests take turns
//! (`SERIAL`): one on-CPU session per process, and tasks are process-wide.

//!
//! They run in optimised builds only (`scripts/test.sh` runs them in the
//! `release-lines` profile): unoptimised code copies a stack more slowly
//! than the hot loops change it, which is not the case they are about.

#![cfg(all(target_os = "linux", not(debug_assertions)))]

mod common;

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_stack::sampler::{FrameRef, MAX_FREQUENCY_HZ, Profile, SampleState, Sampler, Stats};
use async_stack::traced_async;

static SERIAL: Mutex<()> = Mutex::new(());

/// How long each workload is sampled.
const RUN: Duration = Duration::from_secs(2);

fn line_of(marker: &str) -> u32 {
    common::marker_line("tests/sampler_torture.rs", marker)
}

/// The async frames of a stack as (short function name, line), and
/// whether native frames follow them (and only follow them).
fn async_frames(frames: &[FrameRef<'_>]) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let mut native = false;
    for f in frames {
        match *f {
            FrameRef::Async { function, line, .. } => {
                assert!(!native, "an async frame above a native one: {frames:?}");
                let short = function.rsplit("::").next().unwrap_or(function);
                out.push((short.to_owned(), line));
            }
            FrameRef::Native { .. } => native = true,
            FrameRef::Cleared => panic!("nothing is cleared in these runs"),
        }
    }
    out
}

/// Drop rate of a run: samples dropped (torn, inconsistent, or lost in a
/// full buffer) over samples attempted. Printed, not asserted: it depends
/// on the machine's load (a task's thread preempted inside a section
/// fails every copy of that task's stack in that tick), so it is a figure
/// for `benches/benches/sampler.rs` and `BENCHMARKS.md`. What the tests
/// assert instead holds under any load: every attempt is accounted for,
/// and no stack reported is one that never existed.
fn drop_rate(s: &Stats) -> f64 {
    let dropped = s.dropped_torn + s.dropped_inconsistent + s.signals_lost;
    dropped as f64 / (s.attempted + s.signals_lost).max(1) as f64
}

fn report(name: &str, p: &Profile) {
    let s = p.stats();
    println!(
        "{name}: ticks {} attempted {} ok {} retried {} torn {} inconsistent {} signals {} lost {} \
         mismatches {} drop rate {:.4}%",
        s.ticks,
        s.attempted,
        s.ok,
        s.retried,
        s.dropped_torn,
        s.dropped_inconsistent,
        s.signals,
        s.signals_lost,
        s.mismatches,
        drop_rate(s) * 100.0
    );
    assert_eq!(s.mismatches, 0, "{:?}", p.mismatches());
    assert_eq!(s.attempted, s.ok + s.dropped_torn + s.dropped_inconsistent);
    assert!(s.ok > 0);
}

/// Runs `f` on a current-thread runtime on a new thread.
fn spawn_runtime<F>(f: impl FnOnce() -> F + Send + 'static) -> std::thread::JoinHandle<()>
where
    F: std::future::Future<Output = ()>,
{
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(f());
    })
}

fn sample(run: Duration) -> Profile {
    let sampler = Sampler::builder()
        .frequency_hz(MAX_FREQUENCY_HZ)
        .on_cpu(true)
        .start()
        .expect("on-CPU sampling starts on Linux");
    std::thread::sleep(run);
    sampler.stop()
}

// ---- 1. recursive factorial ----

#[inline(never)]
fn spin(n: u64) -> u64 {
    let mut x = n;
    for i in 0..200 {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    x
}

#[traced_async]
async fn factorial(n: u64) -> u64 {
    if n <= 1 {
        return spin(1) & 1 | 1;
    }
    let below = Box::pin(factorial(n - 1)).await; // FACTORIAL_AWAIT
    spin(n);
    n.wrapping_mul(below)
}

#[traced_async]
async fn factorial_loop(stop: &'static AtomicBool) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        std::hint::black_box(factorial(16).await); // LOOP_AWAIT
        i += 1;
        if i % 64 == 0 {
            tokio::task::yield_now().await; // LOOP_YIELD
        }
    }
}

#[test]
fn factorial_samples_are_prefixes_of_the_real_recursion() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    static STOP: AtomicBool = AtomicBool::new(false);
    STOP.store(false, Ordering::Relaxed);
    let t = spawn_runtime(|| async {
        tokio::spawn(factorial_loop(&STOP)).await.unwrap();
    });
    std::thread::sleep(Duration::from_millis(100));
    let profile = sample(RUN);
    STOP.store(true, Ordering::Relaxed);
    t.join().unwrap();
    report("factorial", &profile);

    let fact = line_of("FACTORIAL_AWAIT");
    let loop_await = line_of("LOOP_AWAIT");
    let loop_yield = line_of("LOOP_YIELD");
    let (mut on_cpu_signals, mut checked) = (0, 0);
    for s in profile.stacks() {
        let frames: Vec<_> = s.frames().collect();
        let a = async_frames(&frames);
        if s.group() == "[outside tasks]" {
            assert!(a.is_empty());
            continue;
        }
        assert_eq!(s.group(), "sampler_torture::factorial_loop");
        checked += 1;
        // Rooted at the task root.
        assert_eq!(a[0].0, "factorial_loop", "{a:?}");
        let facts = &a[1..];
        assert!(facts.len() <= 17, "{} factorial frames", facts.len());
        if facts.is_empty() {
            continue;
        }
        assert!(
            a[0].1 == loop_await || (s.state() == SampleState::OnCpu && a[0].1 != loop_yield),
            "{a:?}"
        );
        // A contiguous prefix of factorial(16) -> factorial(15) -> ...:
        // every frame but the innermost is at the recursive `.await`.
        for (i, f) in facts.iter().enumerate() {
            assert_eq!(f.0, "factorial", "{a:?}");
            if i + 1 < facts.len() {
                assert_eq!(f.1, fact, "frame {i} of {a:?}");
            }
        }
        if s.weights().cpu_ns > 0 {
            on_cpu_signals += 1;
        }
    }
    assert!(checked > 0);
    assert!(on_cpu_signals > 0, "on-CPU samples of the hot loop");
}

// ---- 2. two tasks, one thread, disjoint chains ----

#[inline(never)]
fn burn_alpha() -> u64 {
    let mut x = 1u64;
    for i in 0..20_000 {
        x = std::hint::black_box(x.wrapping_mul(7).wrapping_add(i));
    }
    x
}

#[inline(never)]
fn burn_beta() -> u64 {
    let mut x = 3u64;
    for i in 0..20_000 {
        x = std::hint::black_box(x.wrapping_mul(11).wrapping_add(i));
    }
    x
}

#[traced_async]
async fn alpha_inner() {
    std::hint::black_box(burn_alpha());
    tokio::task::yield_now().await; // ALPHA_INNER_YIELD
}

#[traced_async]
async fn alpha_outer(stop: &'static AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        alpha_inner().await; // ALPHA_OUTER_AWAIT
    }
}

#[traced_async]
async fn beta_inner() {
    std::hint::black_box(burn_beta());
    tokio::task::yield_now().await; // BETA_INNER_YIELD
}

#[traced_async]
async fn beta_outer(stop: &'static AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        beta_inner().await; // BETA_OUTER_AWAIT
    }
}

#[test]
fn two_tasks_on_one_thread_never_mix() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    static STOP: AtomicBool = AtomicBool::new(false);
    STOP.store(false, Ordering::Relaxed);
    let t = spawn_runtime(|| async {
        let a = tokio::spawn(alpha_outer(&STOP));
        let b = tokio::spawn(beta_outer(&STOP));
        a.await.unwrap();
        b.await.unwrap();
    });
    std::thread::sleep(Duration::from_millis(100));
    let profile = sample(RUN);
    STOP.store(true, Ordering::Relaxed);
    t.join().unwrap();
    report("two tasks", &profile);

    let alpha = vec![
        ("alpha_outer".to_owned(), line_of("ALPHA_OUTER_AWAIT")),
        ("alpha_inner".to_owned(), 0),
    ];
    let beta = vec![
        ("beta_outer".to_owned(), line_of("BETA_OUTER_AWAIT")),
        ("beta_inner".to_owned(), 0),
    ];
    let mut folded = Vec::new();
    profile.write_folded(&mut folded).unwrap();
    let folded = String::from_utf8(folded).unwrap();
    let mut leaf_samples = [0u64; 2];
    for line in folded.lines() {
        let has_alpha = line.contains("alpha_");
        let has_beta = line.contains("beta_");
        assert!(!(has_alpha && has_beta), "mixed: {line}");
        for (k, (leaf, outer, inner)) in [
            ("burn_alpha", "alpha_outer", "alpha_inner"),
            ("burn_beta", "beta_outer", "beta_inner"),
        ]
        .into_iter()
        .enumerate()
        {
            if line.contains(leaf) {
                // The leaf's whole chain: root, then the inner fn, then
                // the leaf.
                let o = line
                    .find(outer)
                    .unwrap_or_else(|| panic!("no {outer}: {line}"));
                let i = line
                    .find(inner)
                    .unwrap_or_else(|| panic!("no {inner}: {line}"));
                let l = line.find(leaf).unwrap();
                assert!(o < i && i < l, "{line}");
                leaf_samples[k] += 1;
            }
        }
    }
    assert!(leaf_samples[0] > 0 && leaf_samples[1] > 0, "{folded}");
    for s in profile.stacks() {
        let frames: Vec<_> = s.frames().collect();
        let a = async_frames(&frames);
        if a.is_empty() {
            continue;
        }
        let want = if a[0].0 == "alpha_outer" {
            &alpha
        } else {
            &beta
        };
        assert!(a.len() <= 2, "{a:?}");
        for (i, f) in a.iter().enumerate() {
            assert_eq!(f.0, want[i].0, "{a:?}");
            if i + 1 < a.len() {
                assert_eq!(f.1, want[i].1, "{a:?}");
            }
        }
    }
}

// ---- 3. tasks that come and go ----

#[traced_async]
async fn churn_leaf(n: u64) -> u64 {
    tokio::task::yield_now().await; // CHURN_LEAF_YIELD
    spin(n)
}

#[traced_async]
async fn churn_task(n: u64) -> u64 {
    // CHURN_TASK_DEF
    let a = churn_leaf(n).await; // CHURN_TASK_AWAIT
    tokio::task::yield_now().await; // CHURN_TASK_YIELD
    a
}

#[test]
fn tasks_that_come_and_go_give_only_real_chains() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    static STOP: AtomicBool = AtomicBool::new(false);
    STOP.store(false, Ordering::Relaxed);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let driver = rt.spawn(async {
        let mut n = 0u64;
        while !STOP.load(Ordering::Relaxed) {
            let hs: Vec<_> = (0..32).map(|i| tokio::spawn(churn_task(n + i))).collect();
            for h in hs {
                std::hint::black_box(h.await.unwrap());
            }
            n += 32;
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    let profile = sample(RUN);
    STOP.store(true, Ordering::Relaxed);
    rt.block_on(driver).unwrap();
    report("churn", &profile);

    // The marker sits on the line under the `fn` line, where rustfmt puts
    // it; a task not yet polled is at its call site, the `fn` line.
    let task_def = line_of("CHURN_TASK_DEF") - 1;
    let task_await = line_of("CHURN_TASK_AWAIT");
    let task_yield = line_of("CHURN_TASK_YIELD");
    let leaf_yield = line_of("CHURN_LEAF_YIELD");
    let (mut seen, mut cleared) = (0, 0);
    for s in profile.stacks() {
        let frames: Vec<_> = s.frames().collect();
        // Every task is new, so the profile reaches its budget within a
        // second and folds its lightest stacks into `[cleared]`: not a
        // chain, and not counted as one.
        if matches!(frames[..], [FrameRef::Cleared]) {
            cleared += 1;
            continue;
        }
        let a = async_frames(&frames);
        if a.is_empty() {
            continue;
        }
        seen += 1;
        // The two chains the program has: churn_task alone, or
        // churn_task -> churn_leaf.
        assert_eq!(a[0].0, "churn_task", "{a:?}");
        match a.len() {
            1 => {
                if s.state() == SampleState::OffCpu {
                    // At an `.await`, or spawned and not yet polled.
                    assert!(
                        [task_yield, task_await, task_def].contains(&a[0].1),
                        "{a:?}"
                    );
                }
            }
            2 => {
                assert_eq!(a[0].1, task_await, "{a:?}");
                assert_eq!(a[1].0, "churn_leaf", "{a:?}");
                if s.state() == SampleState::OffCpu {
                    assert_eq!(a[1].1, leaf_yield, "{a:?}");
                }
            }
            _ => panic!("no such chain: {a:?}"),
        }
    }
    assert!(seen > 0);
    // The budget folds stacks and never needs to drop the task's group:
    // its weight is all there.
    println!("churn: {cleared} [cleared] stacks");
    assert_eq!(profile.stats().dropped_groups, 0);
}

// ---- 4. every sampled stack is one the walker saw ----

static WALKED: Mutex<Option<HashSet<Vec<(String, u32)>>>> = Mutex::new(None);

/// Records the chain the walker sees here: every frame's function and
/// `.await` line, the innermost (running) frame by function only.
fn record_chain() {
    let bt = async_stack::backtrace();
    let mut chain: Vec<(String, u32)> = bt
        .async_frames()
        .map(|f| {
            let name = f.function().unwrap_or("?");
            let short = name.rsplit("::").next().unwrap_or(name).to_owned();
            (short, f.line().unwrap_or(0))
        })
        .collect();
    chain.reverse();
    if let Some(last) = chain.last_mut() {
        last.1 = 0;
    }
    WALKED
        .lock()
        .unwrap()
        .get_or_insert_with(HashSet::new)
        .insert(chain);
}

#[traced_async]
async fn walked_leaf(n: u64) {
    record_chain();
    spin(n);
    tokio::task::yield_now().await; // WALKED_LEAF_YIELD
    record_chain();
}

#[traced_async]
async fn walked_mid(n: u64) {
    record_chain();
    walked_leaf(n).await; // WALKED_MID_AWAIT
    record_chain();
    tokio::task::yield_now().await; // WALKED_MID_YIELD
    walked_leaf(n + 1).await; // WALKED_MID_AWAIT_2
}

#[traced_async]
async fn walked_root(stop: &'static AtomicBool) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        record_chain();
        walked_mid(n).await; // WALKED_ROOT_AWAIT
        n += 1;
    }
}

#[test]
fn every_sampled_stack_is_one_the_walker_recorded() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    static STOP: AtomicBool = AtomicBool::new(false);
    STOP.store(false, Ordering::Relaxed);
    let t = spawn_runtime(|| async {
        let hs: Vec<_> = (0..3).map(|_| tokio::spawn(walked_root(&STOP))).collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    let profile = sample(RUN);
    STOP.store(true, Ordering::Relaxed);
    t.join().unwrap();
    report("walker", &profile);

    let walked = WALKED.lock().unwrap().clone().expect("chains recorded");
    // The suspended `.await`s the samples may end at, by function.
    let yields: Vec<(String, u32)> = vec![
        ("walked_leaf".into(), line_of("WALKED_LEAF_YIELD")),
        ("walked_mid".into(), line_of("WALKED_MID_YIELD")),
    ];
    let mut checked = 0;
    for s in profile.stacks() {
        let frames: Vec<_> = s.frames().collect();
        let mut a = async_frames(&frames);
        if a.is_empty() {
            continue;
        }
        checked += 1;
        // Compare as the walker recorded: the innermost by function only.
        let last = a.last().cloned().unwrap();
        a.last_mut().unwrap().1 = 0;
        let known = walked.contains(&a);
        let at_yield = s.state() == SampleState::OffCpu && yields.contains(&last);
        assert!(
            known || at_yield && walked.iter().any(|w| w[..w.len() - 1] == a[..a.len() - 1]),
            "a chain the walker never saw: {a:?} (last {last:?}); walked: {walked:?}"
        );
    }
    assert!(checked > 0);
}
