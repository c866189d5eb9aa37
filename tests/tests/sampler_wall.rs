//! The wall-clock sampler, as a user drives it: start, let tasks run,
//! stop, read the profile. Exact stacks and exact counts.
//!
//! Tasks are process-wide, so the tests of this file take turns (`SERIAL`)
//! and each ends its tasks before the next starts.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use async_stack::sampler::{FrameRef, Grouping, Profile, SampleState, Sampler};
use async_stack::{TaskState, traced_async};

static SERIAL: Mutex<()> = Mutex::new(());

const FILE: &str = file!();

#[traced_async]
async fn wait_leaf(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await; // LEAF_AWAIT
}

#[traced_async]
async fn waiter(rx: tokio::sync::oneshot::Receiver<()>) {
    wait_leaf(rx).await; // WAITER_AWAIT
}

#[traced_async]
async fn joiner(a: tokio::sync::oneshot::Receiver<()>, b: tokio::sync::oneshot::Receiver<()>) {
    let _ = tokio::join!(wait_leaf(a), waiter(b)); // JOIN_AWAIT
}

/// The line of the marker comment in this file.
fn line_of(marker: &str) -> u32 {
    common::marker_line("tests/sampler_wall.rs", marker)
}

fn at(function: &'static str, marker: &str) -> (String, u32) {
    (format!("sampler_wall::{function}"), line_of(marker))
}

/// The async frames of a stack as (function, line), for comparison.
fn frames(s: &async_stack::sampler::StackSample<'_>) -> Vec<(String, u32)> {
    s.frames()
        .map(|f| match f {
            FrameRef::Async {
                function,
                file,
                line,
                ..
            } => {
                assert!(file.ends_with("sampler_wall.rs"), "{file} vs {FILE}");
                (function.to_owned(), line)
            }
            other => panic!("a wall-clock sample has only async frames: {other:?}"),
        })
        .collect()
}

/// Runs `f` with a two-worker runtime.
fn run_with<T>(f: impl FnOnce(&tokio::runtime::Runtime) -> T) -> T {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    f(&rt)
}

type Parked = (
    Vec<tokio::sync::oneshot::Sender<()>>,
    Vec<tokio::task::JoinHandle<()>>,
);

/// Spawns `n` tasks (named `name`, if any) and waits until each is parked
/// in `waiter` -> `wait_leaf`. Dropping the senders ends them.
fn park_waiters(rt: &tokio::runtime::Runtime, n: usize, name: Option<&str>) -> Parked {
    let mut senders = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..n {
        let (tx, rx) = tokio::sync::oneshot::channel();
        senders.push(tx);
        handles.push(match name {
            Some(name) => rt.spawn(async_stack::task::spawned(waiter(rx)).named(name)),
            None => rt.spawn(waiter(rx)),
        });
    }
    // Parked is idle, not only two frames deep: a task whose leaf has
    // just returned `Pending` is still inside its poll (running, sampled
    // on-CPU) for as long as its worker is preempted there.
    rt.block_on(async {
        while !all_parked(&async_stack::dump(), n, 2) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    (senders, handles)
}

/// Whether `d` has at least `n` tasks, each idle (its poll over) with at
/// least `depth` frames.
fn all_parked(d: &async_stack::TaskDump, n: usize, depth: usize) -> bool {
    d.tasks.len() >= n
        && d.tasks
            .iter()
            .all(|t| t.frames.len() >= depth && t.state == TaskState::Idle)
}

/// Ends the tasks of [`park_waiters`].
fn end_waiters(rt: &tokio::runtime::Runtime, (senders, handles): Parked) {
    drop(senders);
    for h in handles {
        rt.block_on(h).unwrap();
    }
}

/// A stack's async frames, samples and wall time.
type Shape = (Vec<(String, u32)>, u64, u64);

/// Samples until at least `ticks` ticks were taken.
fn sample_for(builder: async_stack::sampler::SamplerBuilder, ticks: u64) -> Profile {
    let sampler = builder.start().expect("sampler starts");
    while sampler.stats().ticks < ticks {
        std::thread::sleep(Duration::from_millis(5));
    }
    sampler.stop()
}

/// The profile's stats, after checking that every tick read exactly `n`
/// tasks, each whole (none torn, none dropped as inconsistent).
fn every_read_whole(profile: &Profile, n: usize) -> async_stack::sampler::Stats {
    let stats = *profile.stats();
    assert_eq!(stats.dropped_torn, 0);
    assert_eq!(stats.dropped_inconsistent, 0);
    assert_eq!(stats.attempted, stats.ok);
    assert_eq!(stats.ok, stats.ticks * n as u64);
    stats
}

#[test]
fn every_suspended_task_gives_one_sample_per_tick_at_its_await() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 20;
    run_with(|rt| {
        let parked = park_waiters(rt, N, Some("waiters"));
        let profile = sample_for(Sampler::builder().frequency_hz(1000), 20);
        end_waiters(rt, parked);
        let stats = every_read_whole(&profile, N);
        let want = vec![at("waiter", "WAITER_AWAIT"), at("wait_leaf", "LEAF_AWAIT")];
        let mut total = 0;
        let mut tasks = std::collections::HashSet::new();
        for s in profile.stacks() {
            assert_eq!(s.group(), "waiters");
            assert_eq!(s.task_name(), "waiters");
            assert_eq!(s.state(), SampleState::OffCpu);
            assert_eq!(frames(&s), want);
            tasks.insert(s.task_id());
            total += s.weights().samples;
            assert_eq!(
                s.weights().wall_ns,
                s.weights().samples * 1_000_000,
                "one interval per sample"
            );
        }
        assert_eq!(tasks.len(), N);
        assert_eq!(total, stats.ticks * N as u64);
        assert_eq!(profile.totals().samples, total);
    });
}

/// Tasks spawned through the helper and not polled yet are in dumps (see
/// `tokio_tasks.rs`) but have no stack: the sampler leaves them out, and
/// counts nothing for them (neither a sample nor a dropped one).
#[test]
fn tasks_not_polled_yet_are_not_sampled() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 5;
    const QUEUED: usize = 30;
    run_with(|rt| {
        let parked = park_waiters(rt, N, Some("waiters"));
        // A runtime that runs tasks only inside `block_on`: spawned there,
        // these are never polled.
        let idle = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut senders = Vec::new();
        idle.block_on(async {
            for _ in 0..QUEUED {
                let (tx, rx) = tokio::sync::oneshot::channel();
                senders.push(tx);
                drop(async_stack::tokio::spawn_named("queued", waiter(rx)));
            }
        });
        let queued = async_stack::dump()
            .tasks
            .iter()
            .filter(|t| t.name.as_deref() == Some("queued") && t.polls == 0)
            .count();
        assert_eq!(queued, QUEUED);
        let profile = sample_for(Sampler::builder().frequency_hz(1000), 20);
        drop(idle);
        end_waiters(rt, parked);
        let stats = every_read_whole(&profile, N);
        for s in profile.stacks() {
            assert_eq!(s.task_name(), "waiters");
        }
        assert_eq!(profile.totals().samples, stats.ticks * N as u64);
        drop(senders);
    });
}

#[test]
fn a_join_gives_one_stack_per_pending_branch() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_with(|rt| {
        let (ta, ra) = tokio::sync::oneshot::channel::<()>();
        let (tb, rb) = tokio::sync::oneshot::channel::<()>();
        let h = rt.spawn(joiner(ra, rb));
        rt.block_on(async {
            while !all_parked(&async_stack::dump(), 1, 4) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let profile = sample_for(
            Sampler::builder()
                .frequency_hz(1000)
                .grouping(Grouping::SpawnSite),
            10,
        );
        drop((ta, tb));
        rt.block_on(h).unwrap();
        let ticks = profile.stats().ticks;
        let mut got: Vec<Shape> = profile
            .stacks()
            .map(|s| {
                assert_eq!(s.group(), "sampler_wall::joiner", "no spawn site: the root");
                (frames(&s), s.weights().samples, s.weights().wall_ns)
            })
            .collect();
        got.sort();
        let join = at("joiner", "JOIN_AWAIT");
        let mut want = vec![
            (
                vec![join.clone(), at("wait_leaf", "LEAF_AWAIT")],
                ticks,
                ticks * 500_000,
            ),
            (
                vec![
                    join,
                    at("waiter", "WAITER_AWAIT"),
                    at("wait_leaf", "LEAF_AWAIT"),
                ],
                ticks,
                ticks * 500_000,
            ),
        ];
        want.sort();
        assert_eq!(got, want);
    });
}

#[test]
fn above_the_per_tick_limit_totals_stay_exact() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 100;
    run_with(|rt| {
        let parked = park_waiters(rt, N, None);
        let profile = sample_for(
            Sampler::builder().frequency_hz(1000).max_tasks_per_tick(10),
            10,
        );
        end_waiters(rt, parked);
        let s = *profile.stats();
        assert_eq!(s.attempted, s.ticks * 10);
        assert_eq!(s.reservoir_skipped, s.ticks * 90);
        assert_eq!(profile.totals().samples, s.ticks * N as u64);
        assert_eq!(profile.totals().wall_ns, s.ticks * N as u64 * 1_000_000);
    });
}

#[test]
fn bad_settings_are_refused_with_a_clear_error() {
    for (b, needle) in [
        (Sampler::builder().frequency_hz(0), "frequency_hz"),
        (Sampler::builder().frequency_hz(1_000_000), "frequency_hz"),
        (
            Sampler::builder().max_tasks_per_tick(0),
            "max_tasks_per_tick",
        ),
        (Sampler::builder().memory_budget(1), "memory_budget"),
        (Sampler::builder().memory_budget(1 << 30), "memory_budget"),
    ] {
        let e = b.start().expect_err("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains(needle), "{e}");
    }
}

#[test]
fn a_profile_saved_loaded_and_resumed_keeps_aggregating() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 5;
    run_with(|rt| {
        let parked = park_waiters(rt, N, Some("resumed"));
        let first = sample_for(Sampler::builder().frequency_hz(1000), 10);
        let path =
            std::env::temp_dir().join(format!("async-stack-resume-{}.asprof", std::process::id()));
        first.save(&path).expect("saved");
        let loaded = Profile::load(&path).expect("loaded");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(loaded.stats(), first.stats());
        assert_eq!(loaded.totals(), first.totals());

        // A new sampler (as after a restart) continues the loaded profile.
        let before = *loaded.stats();
        let second = sample_for(
            Sampler::builder().frequency_hz(1000).resume(loaded),
            before.ticks + 10,
        );
        end_waiters(rt, parked);
        let after = *second.stats();
        assert!(after.ticks >= before.ticks + 10);
        assert_eq!(after.ok, after.ticks * N as u64, "counters carry on");
        assert_eq!(second.totals().samples, after.ticks * N as u64);
        // The same tasks, the same stacks: entries grew, none were added.
        assert_eq!(second.stacks().count(), first.stacks().count());
        assert!(second.duration() > first.duration());
        for s in second.stacks() {
            assert_eq!(s.group(), "resumed");
            assert_eq!(
                frames(&s),
                vec![at("waiter", "WAITER_AWAIT"), at("wait_leaf", "LEAF_AWAIT")]
            );
        }
    });
}
