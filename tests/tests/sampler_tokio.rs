//! The sampler and plain `tokio::spawn` tasks (issue 22): the traced
//! roots polled inside one tokio task are one task of the profile, in the
//! group of the first of them, with the tokio task's id; a root polled
//! outside tokio keeps a group of its own. Exact folded lines, weights and
//! counters, on `current_thread` and `multi_thread` runtimes, and on-CPU
//! samples (Linux) labelled as the wall-clock ones.
//!
//! Tasks are process-wide, so the tests of this file take turns (`SERIAL`)
//! and each ends its tasks before the next starts.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Waker};
use std::time::Duration;

use async_stack::sampler::{Grouping, Profile, SampleState, Sampler};
use async_stack::traced_async;
use tokio::sync::oneshot;

static SERIAL: Mutex<()> = Mutex::new(());

#[traced_async]
async fn left(rx: oneshot::Receiver<()>) {
    let _ = rx.await; // LEFT_AWAIT
}

#[traced_async]
async fn right(rx: oneshot::Receiver<()>) {
    let _ = rx.await; // RIGHT_AWAIT
}

#[traced_async]
async fn lone(rx: oneshot::Receiver<()>) {
    let _ = rx.await; // LONE_AWAIT
}

#[traced_async]
async fn spinner(stop: Arc<AtomicBool>) {
    tokio::task::yield_now().await; // SPIN_YIELD
    while !stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
}

const INTERVAL_NS: u64 = 1_000_000;

/// `function at file:line:column` of the `.await` on the marker's line
/// (its column is the `await` keyword's), as folded stacks print an
/// async frame.
fn at(function: &str, marker: &str) -> String {
    let line = common::marker_line("tests/sampler_tokio.rs", marker);
    let text = include_str!("sampler_tokio.rs")
        .lines()
        .nth(line as usize - 1)
        .unwrap();
    let column = text.find(".await").unwrap() + 2;
    format!("sampler_tokio::{function} at {}:{line}:{column}", file!())
}

/// The folded lines of `profile`.
fn folded(profile: &Profile) -> Vec<String> {
    let mut out = Vec::new();
    profile.write_folded(&mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The async frames every live task shows in a dump, as (function,
/// running).
fn live_frames() -> Vec<(String, bool)> {
    async_stack::dump()
        .tasks
        .iter()
        .flat_map(|t| t.frames.iter())
        .map(|f| (f.function.to_string(), f.running))
        .collect()
}

/// Drives `rt` (a `current_thread` one runs only then) until a dump
/// shows every frame of `want`.
fn wait_for(rt: &tokio::runtime::Runtime, want: &[(&str, bool)]) {
    for _ in 0..5_000 {
        rt.block_on(tokio::task::yield_now());
        let live = live_frames();
        if want
            .iter()
            .all(|&(f, running)| live.contains(&(format!("sampler_tokio::{f}"), running)))
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("never saw {want:?} in {:?}", live_frames());
}

/// Samples at 1000 Hz until at least `ticks` ticks were taken.
fn sample_for(grouping: Grouping, ticks: u64) -> Profile {
    let sampler = Sampler::builder()
        .frequency_hz(1000)
        .grouping(grouping)
        .start()
        .expect("sampler starts");
    while sampler.stats().ticks < ticks {
        std::thread::sleep(Duration::from_millis(5));
    }
    sampler.stop()
}

fn runtimes() -> Vec<(&'static str, tokio::runtime::Runtime)> {
    vec![
        (
            "current_thread",
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        ),
        (
            "multi_thread",
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ),
    ]
}

/// A runtime of one worker, which a spinning root holds (so that it
/// stays inside its poll, deterministically), and the flag that stops
/// [`spinner`].
fn one_worker() -> (tokio::runtime::Runtime, Arc<AtomicBool>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    (rt, Arc::new(AtomicBool::new(false)))
}

/// A root polled once by hand on this thread, outside any tokio task.
fn poll_outside_tokio(f: &mut Pin<Box<impl Future<Output = ()>>>) {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(f.as_mut().poll(&mut cx).is_pending());
}

/// The tokio id of a join handle, as the number it displays.
fn id_of<T>(h: &tokio::task::JoinHandle<T>) -> u64 {
    h.id().to_string().parse().unwrap()
}

#[test]
fn the_roots_of_one_tokio_task_fall_in_one_group_and_a_task_outside_tokio_in_its_own() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (kind, rt) in runtimes() {
        let (ta, ra) = oneshot::channel();
        let (tb, rb) = oneshot::channel();
        let h = rt.spawn(async move {
            tokio::join!(left(ra), right(rb));
        });
        let (tc, rc) = oneshot::channel();
        let mut outside = Box::pin(lone(rc));
        poll_outside_tokio(&mut outside);
        wait_for(&rt, &[("left", false), ("right", false), ("lone", false)]);

        let profile = sample_for(Grouping::TaskName, 20);
        let ticks = profile.stats().ticks;
        let stats = *profile.stats();
        // Two tasks: the tokio task (both roots) and the one outside.
        assert_eq!(
            (stats.attempted, stats.ok),
            (2 * ticks, 2 * ticks),
            "{kind}"
        );
        // Each tick shares one interval among the tokio task's two
        // pending roots, and gives the lone task a whole one.
        assert_eq!(
            folded(&profile),
            [
                format!("sampler_tokio::left;{} {ticks}", at("left", "LEFT_AWAIT")),
                format!("sampler_tokio::left;{} {ticks}", at("right", "RIGHT_AWAIT")),
                format!("sampler_tokio::lone;{} {ticks}", at("lone", "LONE_AWAIT")),
            ],
            "{kind}"
        );
        let tokio_id = id_of(&h);
        let mut task_ids = Vec::new();
        for s in profile.stacks() {
            assert_eq!(s.state(), SampleState::OffCpu);
            assert_eq!(s.task_name(), "");
            if s.group() == "sampler_tokio::lone" {
                assert_eq!(s.tokio_id(), None, "{kind}: outside tokio");
                assert_eq!(s.weights().wall_ns, ticks * INTERVAL_NS);
            } else {
                assert_eq!(s.tokio_id(), Some(tokio_id), "{kind}: JoinHandle::id()");
                assert_eq!(s.weights().wall_ns, ticks * INTERVAL_NS / 2);
                task_ids.push(s.task_id());
            }
        }
        assert_eq!(task_ids.len(), 2);
        assert_eq!(
            task_ids[0], task_ids[1],
            "{kind}: one task id for both roots"
        );

        drop((ta, tb, tc));
        rt.block_on(h).unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(outside.as_mut().poll(&mut cx).is_ready());
    }
}

/// The roots of one tokio task show the name (or spawn site) of the first
/// root that has one, here the second root, spawned through a helper.
#[test]
fn the_roots_take_the_first_name_or_spawn_site_among_them() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (ta, ra) = oneshot::channel();
    let (tb, rb) = oneshot::channel();
    let h = rt.spawn(async move {
        let named = async_stack::task::spawned(right(rb)).named("named-right"); // SPAWNED
        tokio::join!(left(ra), named);
    });
    wait_for(&rt, &[("left", false), ("right", false)]);

    let by_name = sample_for(Grouping::TaskName, 10);
    let ticks = by_name.stats().ticks;
    assert_eq!(
        folded(&by_name),
        [
            format!("named-right;{} {ticks}", at("left", "LEFT_AWAIT")),
            format!("named-right;{} {ticks}", at("right", "RIGHT_AWAIT")),
        ]
    );
    assert!(by_name.stacks().all(|s| s.task_name() == "named-right"));

    let by_site = sample_for(Grouping::SpawnSite, 10);
    let ticks = by_site.stats().ticks;
    let spawn_line = common::marker_line("tests/sampler_tokio.rs", "SPAWNED");
    let site = format!("{}:{spawn_line}", file!());
    assert_eq!(
        folded(&by_site),
        [
            format!("{site};{} {ticks}", at("left", "LEFT_AWAIT")),
            format!("{site};{} {ticks}", at("right", "RIGHT_AWAIT")),
        ]
    );

    drop((ta, tb));
    rt.block_on(h).unwrap();
}

/// A tokio task with a root inside its poll is running: its sample is the
/// path to the frame that root polls (on-CPU, a whole interval), and its
/// other, idle, root gives none.
#[test]
fn a_tokio_task_with_a_busy_root_gives_that_root_s_running_path() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rt, stop) = one_worker();
    let (tb, rb) = oneshot::channel();
    let spin = stop.clone();
    let h = rt.spawn(async move {
        tokio::join!(spinner(spin), right(rb));
    });
    wait_for(&rt, &[("spinner", true), ("right", false)]);

    let profile = sample_for(Grouping::TaskName, 20);
    stop.store(true, Ordering::Relaxed);
    let ticks = profile.stats().ticks;
    assert_eq!(profile.stats().ok, ticks);
    assert_eq!(
        folded(&profile),
        [format!(
            "sampler_tokio::spinner;{} {ticks}",
            at("spinner", "SPIN_YIELD")
        )]
    );
    let s = profile.stacks().next().unwrap();
    assert_eq!(s.state(), SampleState::OnCpu);
    assert_eq!(s.weights().wall_ns, ticks * INTERVAL_NS);
    assert_eq!(s.tokio_id(), Some(id_of(&h)));

    drop(tb);
    rt.block_on(h).unwrap();
}

/// On-CPU samples (Linux) of a tokio task's second root fall in the group
/// of its first, with the first root's task id and the tokio id, as its
/// wall-clock samples do.
#[cfg(target_os = "linux")]
#[test]
fn on_cpu_samples_of_a_second_root_fall_in_the_first_root_s_group() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rt, stop) = one_worker();
    let (ta, ra) = oneshot::channel();
    let spin = stop.clone();
    let h = rt.spawn(async move {
        tokio::join!(left(ra), spinner(spin));
    });
    wait_for(&rt, &[("left", false), ("spinner", true)]);

    let sampler = Sampler::builder()
        .frequency_hz(99)
        .on_cpu(true)
        .start()
        .expect("on-CPU sampler starts");
    while sampler.stats().signals < 10 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let profile = sampler.stop();
    stop.store(true, Ordering::Relaxed);
    let tokio_id = id_of(&h);
    let mine: Vec<_> = profile
        .stacks()
        .filter(|s| s.tokio_id() == Some(tokio_id))
        .collect();
    let on_cpu = mine.iter().filter(|s| s.weights().cpu_ns > 0).count();
    assert!(on_cpu > 0, "no on-CPU sample of the spinning root");
    let task_id = mine[0].task_id();
    for s in &mine {
        assert_eq!(s.group(), "sampler_tokio::left", "{:?}", s.weights());
        assert_eq!(s.task_id(), task_id);
        assert_eq!(s.state(), SampleState::OnCpu);
        let first = s.frames().next();
        assert!(
            matches!(first, Some(async_stack::sampler::FrameRef::Async { function, .. })
                if function == "sampler_tokio::spinner"),
            "{first:?}"
        );
    }
    // Every on-CPU sample of the thread that runs the spinner is one of
    // this tokio task's.
    assert!(profile.stacks().all(|s| s.weights().cpu_ns == 0
        || s.tokio_id() == Some(tokio_id)
        || s.group() == "[outside tasks]"));

    drop(ta);
    rt.block_on(h).unwrap();
}
