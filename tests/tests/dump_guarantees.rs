//! The guarantees of `async_stack::dump()`: it completes while a task is
//! blocked inside a poll, shows a CPU-bound task as running with its live
//! stack, changes nothing, and survives 1,000 dumps racing with tasks that
//! spawn and finish on every thread.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_stack::dump::DumpFrame;
use async_stack::{TaskState, traced_async};
use common::wait_for;

mod common;

/// Whether dumps mark which frames of a task are running: on x86-64 only
/// (README, "Stack accuracy"); elsewhere no frame is marked.
const RUNNING_MARKED: bool = cfg!(target_arch = "x86_64");

fn await_line(f: &DumpFrame) -> Option<u32> {
    f.awaiting_at.as_ref().map(|a| a.line)
}

fn short(f: &DumpFrame) -> &str {
    f.function.rsplit("::").next().unwrap()
}

/// The task of `d` whose root function is `name` (in this test file).
fn task_rooted_at<'d>(
    d: &'d async_stack::TaskDump,
    name: &str,
) -> Option<&'d async_stack::TaskInfo> {
    d.tasks.iter().find(|t| {
        t.root
            .as_deref()
            .is_some_and(|r| r.rsplit("::").next() == Some(name))
    })
}

// ---- a task blocked inside a poll on a mutex the dumping thread holds ----

/// Set by [`lock_it`] just before it blocks: from then on the task's
/// stack does not change until the mutex is released.
static LOCKING: AtomicBool = AtomicBool::new(false);

#[inline(never)]
fn lock_it(m: &Mutex<()>) {
    LOCKING.store(true, Ordering::Release);
    drop(m.lock().unwrap());
}

#[traced_async]
async fn blocked_leaf(m: Arc<Mutex<()>>) {
    lock_it(&m);
}

const BLOCKED_ROOT_AWAIT: u32 = line!() + 3;
#[traced_async]
async fn blocked_root(m: Arc<Mutex<()>>) {
    blocked_leaf(m).await;
}

#[test]
fn dump_completes_while_a_task_blocks_forever_in_a_poll() {
    let m = Arc::new(Mutex::new(()));
    let guard = m.lock().unwrap();
    let m2 = m.clone();
    let t = std::thread::spawn(move || futures::executor::block_on(blocked_root(m2)));
    wait_for("the task at its lock", || {
        assert!(!t.is_finished(), "the task ended before it locked");
        LOCKING.load(Ordering::Acquire)
    });
    // The dumping thread holds the mutex the task is blocked on.
    let d = async_stack::dump();
    let task = task_rooted_at(&d, "blocked_root").unwrap();
    assert_eq!(task.state, TaskState::Running);
    assert_eq!(
        task.frames.iter().map(short).collect::<Vec<_>>(),
        ["blocked_root", "blocked_leaf"]
    );
    assert!(task.frames.iter().all(|f| f.running == RUNNING_MARKED));
    assert_eq!(await_line(&task.frames[0]), Some(BLOCKED_ROOT_AWAIT));
    assert_eq!(
        await_line(&task.frames[1]),
        None,
        "the leaf is executing, not awaiting"
    );
    drop(guard);
    t.join().unwrap();
}

// ---- a CPU-bound task shows as running, with its current stack ----

/// What a spinning task shares with its test: the task says when it
/// has reached its spin, the test when it is to stop.
#[derive(Default)]
struct Spin {
    spinning: AtomicBool,
    stop: AtomicBool,
}

#[inline(never)]
fn spin_until(spin: &Spin) {
    spin.spinning.store(true, Ordering::Release);
    while !spin.stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
}

const SPIN_LEAF_AWAIT: u32 = line!() + 3;
#[traced_async]
async fn spin_leaf(stop: Arc<Spin>) {
    tokio::task::yield_now().await;
    spin_until(&stop);
}

const SPIN_MID_AWAIT: u32 = line!() + 3;
#[traced_async]
async fn spin_mid(stop: Arc<Spin>) {
    spin_leaf(stop).await;
}

const SPIN_ROOT_AWAIT: u32 = line!() + 3;
#[traced_async]
async fn spin_root(stop: Arc<Spin>) {
    spin_mid(stop).await;
}

/// A task spinning on a one-worker runtime until stopped. Dropping this
/// stops the spinner before the runtime shuts down, so a failed assertion is
/// reported instead of hanging in that shutdown.
struct Spinning {
    stop: Arc<Spin>,
    handle: tokio::task::JoinHandle<()>,
    rt: tokio::runtime::Runtime,
}

impl Spinning {
    fn start<F>(task: impl FnOnce(Arc<Spin>) -> F) -> Spinning
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let stop = Arc::new(Spin::default());
        let handle = rt.spawn(task(stop.clone()));
        Spinning { stop, handle, rt }
    }

    /// A dump taken once the task has reached its spin: the task's
    /// stack no longer changes, so this one dump must show it (a dump
    /// retried until it looks right could catch the task on its way).
    fn dump(&self) -> async_stack::TaskDump {
        wait_for("the task in its spin", || {
            assert!(!self.handle.is_finished(), "the task ended before its spin");
            self.stop.spinning.load(Ordering::Acquire)
        });
        async_stack::dump()
    }

    /// Stops the spinner and waits for its task to finish cleanly.
    fn finish(mut self) {
        self.stop.stop.store(true, Ordering::Relaxed);
        self.rt.block_on(&mut self.handle).unwrap();
    }
}

impl Drop for Spinning {
    fn drop(&mut self) {
        self.stop.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn cpu_bound_task_is_running_with_its_current_stack() {
    let spinning = Spinning::start(spin_root);
    let d = spinning.dump();
    let task = task_rooted_at(&d, "spin_root").unwrap();
    assert_eq!(task.state, TaskState::Running);
    assert_eq!(
        task.frames.iter().map(short).collect::<Vec<_>>(),
        ["spin_root", "spin_mid", "spin_leaf"]
    );
    assert_eq!(
        task.frames.iter().map(|f| f.depth).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert_eq!(await_line(&task.frames[0]), Some(SPIN_ROOT_AWAIT));
    assert_eq!(
        await_line(&task.frames[1]),
        Some(SPIN_MID_AWAIT),
        "spin_mid awaits spin_leaf"
    );
    let leaf = &task.frames[2];
    assert_eq!(leaf.running, RUNNING_MARKED);
    if RUNNING_MARKED {
        assert!(
            leaf.awaiting_at.is_none(),
            "the leaf runs, awaiting nothing"
        );
    } else {
        // Unmarked, the innermost frame shows the last `.await` it reached.
        assert_eq!(await_line(leaf), Some(SPIN_LEAF_AWAIT));
    }
    spinning.finish();
}

// ---- a frame running on after its child returned `Pending` ----

const PENDING_CHILD_AWAIT: u32 = line!() + 3;
#[traced_async]
async fn pending_child() {
    std::future::pending::<()>().await;
}

/// Polls `pending_child` once (it stays pending, and keeps its place in the
/// task), then spins in its own body.
#[traced_async]
async fn spin_after_child(stop: Arc<Spin>) {
    let mut child = std::pin::pin!(pending_child());
    assert!(futures::poll!(child.as_mut()).is_pending());
    spin_until(&stop);
}

#[test]
fn the_parent_runs_again_once_its_child_returned_pending() {
    let spinning = Spinning::start(spin_after_child);
    let d = spinning.dump();
    let task = task_rooted_at(&d, "spin_after_child").unwrap();
    assert_eq!(task.state, TaskState::Running);
    assert_eq!(
        task.frames.iter().map(short).collect::<Vec<_>>(),
        ["spin_after_child", "pending_child"]
    );
    assert_eq!(
        task.frames.iter().map(|f| f.running).collect::<Vec<_>>(),
        [RUNNING_MARKED, false],
        "the child is suspended; its parent runs"
    );
    assert_eq!(await_line(&task.frames[1]), Some(PENDING_CHILD_AWAIT));
    spinning.finish();
}

// ---- dumps have no side effects ----

#[traced_async]
async fn parked(rx: futures::channel::oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[test]
fn dumps_change_no_poll_or_wake_count_and_no_state() {
    use futures::task::LocalSpawnExt;
    let mut pool = futures::executor::LocalPool::new();
    let mut senders = Vec::new();
    for _ in 0..5 {
        let (tx, rx) = futures::channel::oneshot::channel();
        senders.push(tx);
        pool.spawner().spawn_local(parked(rx)).unwrap();
    }
    pool.run_until_stalled();
    let mine = |d: &async_stack::TaskDump| -> Vec<(u64, u64, u64, TaskState)> {
        d.tasks
            .iter()
            .filter(|t| t.root.as_deref().is_some_and(|r| r.ends_with("::parked")))
            .map(|t| (t.id, t.polls, t.wakes, t.state))
            .collect()
    };
    let before = mine(&async_stack::dump());
    assert_eq!(before.len(), 5);
    assert!(
        before
            .iter()
            .all(|&(_, polls, wakes, state)| polls == 1 && wakes == 0 && state == TaskState::Idle)
    );
    for _ in 0..200 {
        let _ = async_stack::dump().to_string();
    }
    assert_eq!(mine(&async_stack::dump()), before);
    // Waking is seen as such: one wake, state scheduled, no extra poll.
    senders.remove(0).send(()).unwrap();
    let after = mine(&async_stack::dump());
    assert_eq!(after[0].1, 1);
    assert_eq!(after[0].2, 1);
    assert_eq!(after[0].3, TaskState::Scheduled);
    drop(senders);
    pool.run();
    assert!(mine(&async_stack::dump()).is_empty());
}

// ---- 1,000 dumps racing with tasks spawning and finishing everywhere ----

const STRESS_AWAITS: [u32; 3] = [STRESS_A_AWAIT, STRESS_B_AWAIT, STRESS_C_AWAIT];

const STRESS_C_AWAIT: u32 = line!() + 3;
#[traced_async]
async fn stress_c(n: u32) -> u64 {
    tokio::time::sleep(Duration::from_micros(200)).await;
    u64::from(n)
}

const STRESS_B_AWAIT: u32 = line!() + 5;
#[traced_async]
async fn stress_b(n: u32) -> u64 {
    let mut acc = 0;
    for i in 0..n {
        acc += stress_c(i).await;
    }
    acc
}

const STRESS_A_AWAIT: u32 = line!() + 3;
#[traced_async]
async fn stress_a(n: u32) -> u64 {
    let v = stress_b(n).await;
    v + async_stack::current_task_id().unwrap()
}

#[test]
fn a_thousand_dumps_race_with_spawning_and_finishing_tasks() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let finished: Arc<Mutex<HashSet<u64>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let spawned = Arc::new(AtomicU64::new(0));
    let spawner = {
        let finished = finished.clone();
        let stop = stop.clone();
        let spawned = spawned.clone();
        let handle = rt.handle().clone();
        std::thread::spawn(move || {
            let mut round = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let hs: Vec<_> = (0..16)
                    .map(|i| {
                        let n = (round + i) % 4;
                        handle.spawn(async move {
                            let id_plus = stress_a(n).await;
                            let sum: u64 = (0..u64::from(n)).sum();
                            id_plus - sum
                        })
                    })
                    .collect();
                spawned.fetch_add(16, Ordering::Relaxed);
                for h in hs {
                    let id = handle.block_on(h).unwrap();
                    finished.lock().unwrap().insert(id);
                }
                round += 1;
            }
        })
    };
    while spawned.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    let mut seen_tasks = 0usize;
    let mut seen_deep = 0usize;
    // At least 1,000 dumps, and for as long as it takes the spawner to run
    // 20 rounds (320 tasks), so the dumps overlap real spawning and
    // finishing on both workers.
    let mut dumps = 0u32;
    while dumps < 1000 || spawned.load(Ordering::Relaxed) < 20 * 16 {
        dumps += 1;
        let finished_before: HashSet<u64> = finished.lock().unwrap().clone();
        let d = async_stack::dump();
        for t in d
            .tasks
            .iter()
            .filter(|t| t.root.as_deref().is_some_and(|r| r.ends_with("::stress_a")))
        {
            seen_tasks += 1;
            assert!(
                !finished_before.contains(&t.id),
                "finished task {} reported live",
                t.id
            );
            assert!(!t.stack_unavailable || t.frames.is_empty());
            // Every reported stack is one this program can produce: a chain
            // stress_a -> stress_b -> stress_c, each frame at its depth and,
            // when suspended, at its own `.await`.
            let names = ["stress_a", "stress_b", "stress_c"];
            assert!(t.frames.len() <= 3, "impossible stack {:?}", t.frames);
            for (i, f) in t.frames.iter().enumerate() {
                assert_eq!(f.depth as usize, i, "torn stack {:?}", t.frames);
                assert_eq!(short(f), names[i], "torn stack {:?}", t.frames);
                if let Some(line) = await_line(f) {
                    assert_eq!(line, STRESS_AWAITS[i], "torn stack {:?}", t.frames);
                }
            }
            if t.frames.len() == 3 {
                seen_deep += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    spawner.join().unwrap();
    // The race was real: dumps saw live tasks, some of them three deep.
    assert!(
        seen_tasks > 0,
        "no dump saw a live task: {}",
        async_stack::dump()
    );
    assert!(seen_deep > 0, "no dump saw a three-deep stack");
    // After everything finished, none of them is live.
    let all_finished = finished.lock().unwrap().clone();
    let d = async_stack::dump();
    assert!(d.tasks.iter().all(|t| !all_finished.contains(&t.id)));
}

// ---- a running frame that moved on to a later `.await` in the same poll ----

#[traced_async]
async fn quick() -> u32 {
    7
}

/// Spins in its first poll: everything above it happens in that one poll.
#[traced_async]
async fn spin_now(stop: Arc<Spin>) {
    spin_until(&stop);
}

const MOVED_ON_SECOND_AWAIT: u32 = line!() + 4;
#[traced_async]
async fn moved_on(stop: Arc<Spin>) {
    let _ = quick().await;
    spin_now(stop).await;
}

#[test]
fn a_running_frame_shows_the_await_it_moved_on_to() {
    let spinning = Spinning::start(moved_on);
    let d = spinning.dump();
    let task = task_rooted_at(&d, "moved_on").unwrap();
    assert_eq!(task.state, TaskState::Running);
    assert_eq!(task.polls, 1, "all of this happens inside the first poll");
    assert_eq!(
        task.frames.iter().map(short).collect::<Vec<_>>(),
        ["moved_on", "spin_now"]
    );
    assert_eq!(await_line(&task.frames[0]), Some(MOVED_ON_SECOND_AWAIT));
    spinning.finish();
}

// ---- one consistent copy of a task: its state and its running frames ----

/// A leaf that is `Pending` on every poll and never wakes anyone.
struct PendingEveryPoll;

impl std::future::Future for PendingEveryPoll {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::task::Poll::Pending
    }
}

#[traced_async]
async fn flicker_leaf() {
    PendingEveryPoll.await
}

#[traced_async(name = "flicker")]
async fn flicker() {
    flicker_leaf().await
}

/// A task that a thread polls back to back, so that it flips between
/// running and idle all the time, is always reported as one copy of one
/// instant: idle with no running frame, or running with the running frames
/// forming a path from the root. Thousands of dumps race with it.
#[test]
fn a_task_state_and_its_running_frames_come_from_one_instant() {
    let stop = Arc::new(AtomicBool::new(false));
    let polled = Arc::new(AtomicU64::new(0));
    let (s2, p2) = (stop.clone(), polled.clone());
    let poller = std::thread::spawn(move || {
        let mut fut = std::pin::pin!(flicker());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        while !s2.load(Ordering::Relaxed) {
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            p2.fetch_add(1, Ordering::Relaxed);
        }
    });
    while polled.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    let polls_before = polled.load(Ordering::Relaxed);
    for _ in 0..20_000 {
        let d = async_stack::dump().with_name_containing("flicker");
        let Some(t) = d
            .tasks
            .iter()
            .find(|t| t.name.as_deref() == Some("flicker"))
        else {
            continue;
        };
        if t.stack_unavailable {
            continue;
        }
        assert_eq!(t.frames.len(), 2, "{d}");
        let running: Vec<bool> = t.frames.iter().map(|f| f.running).collect();
        match t.state {
            TaskState::Running => {
                // The running frames are a path from the root (possibly
                // empty between the root's entry and its frame).
                assert!(
                    running == [false, false]
                        || running == [true, false]
                        || running == [true, true],
                    "{d}"
                );
            }
            _ => {
                assert_eq!(
                    running,
                    [false, false],
                    "an idle task with a running frame:\n{d}"
                );
            }
        }
    }
    // The race was real: the task was polled while the dumps ran.
    assert!(polled.load(Ordering::Relaxed) > polls_before);
    stop.store(true, Ordering::Relaxed);
    poller.join().unwrap();
}

// ---- a root whose poll panicked, kept alive ----

#[traced_async(name = "panicked-root")]
async fn panics_once(flag: Arc<AtomicBool>) {
    if !flag.swap(true, Ordering::SeqCst) {
        panic!("first poll panics");
    }
}

/// A task root whose poll unwinds, caught by `catch_unwind` and kept
/// rather than dropped, is not shown running afterwards: no poll runs.
#[test]
fn a_root_whose_poll_panicked_and_was_kept_is_not_running() {
    let mut fut = Box::pin(panics_once(Arc::new(AtomicBool::new(false))));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = fut.as_mut().poll(&mut cx);
    }));
    assert!(caught.is_err());
    let d = async_stack::dump();
    let t = d
        .tasks
        .iter()
        .find(|t| t.name.as_deref() == Some("panicked-root"))
        .expect("the task is still live");
    assert_eq!(t.state, TaskState::Idle, "{d}");
    assert!(t.frames.iter().all(|f| !f.running), "{d}");
    drop(fut);
}
