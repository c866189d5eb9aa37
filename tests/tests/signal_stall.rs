//! Finding a stuck task without a debugger: the stall watchdog reports a
//! task blocked inside a poll, with its stack; a signal writes a dump.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use async_stack::dump::format_duration;
use async_stack::stall::{StallKind, StallReport, Watchdog};
use async_stack::{TaskState, traced_async};
use common::{PATIENCE, wait_for};

mod common;

/// Set once the stuck task has reached its leaf, where it stays: the
/// watchdog starts only then, so that its first report cannot catch the
/// task on its way (preempted past the threshold before the leaf).
static REACHED_LEAF: AtomicBool = AtomicBool::new(false);

#[inline(never)]
fn wait_for_release(rx: &mpsc::Receiver<()>) {
    REACHED_LEAF.store(true, Ordering::Release);
    let _ = rx.recv();
}

#[traced_async]
async fn stuck_leaf(rx: mpsc::Receiver<()>) {
    wait_for_release(&rx);
}

const STUCK_AWAIT: u32 = line!() + 3;
#[traced_async(name = "stuck-root")]
async fn stuck_root(rx: mpsc::Receiver<()>) {
    stuck_leaf(rx).await;
}

#[test]
fn watchdog_reports_a_task_blocked_in_a_poll_with_its_stack() {
    let (release_tx, release_rx) = mpsc::channel();
    let t = std::thread::spawn(move || futures::executor::block_on(stuck_root(release_rx)));
    wait_for("the task at its leaf", || {
        assert!(!t.is_finished(), "the task ended before its leaf");
        REACHED_LEAF.load(Ordering::Acquire)
    });
    let (report_tx, report_rx) = mpsc::channel::<StallReport>();
    let watchdog = Watchdog::builder()
        .running_threshold(Duration::from_millis(50))
        .interval(Duration::from_millis(10))
        .on_stall(move |r| {
            if r.task.name.as_deref() == Some("stuck-root") {
                let _ = report_tx.send(r.clone());
            }
        })
        .spawn()
        .unwrap();
    let report = report_rx.recv_timeout(PATIENCE).expect("no stall report");
    assert_eq!(report.kind, StallKind::Running);
    assert_eq!(report.task.state, TaskState::Running);
    assert!(report.task.time_in_state() >= Duration::from_millis(50));
    let frames: Vec<(&str, Option<u32>, bool)> = report
        .task
        .frames
        .iter()
        .map(|f| {
            (
                &*f.function,
                f.awaiting_at.as_ref().map(|a| a.line),
                f.running,
            )
        })
        .collect();
    assert_eq!(
        frames,
        [
            ("stuck-root", Some(STUCK_AWAIT), true),
            ("signal_stall::stuck_leaf", None, true)
        ]
    );
    // The report's text: one line, then the task as a dump shows it.
    let (id, time) = (report.task.id, format_duration(report.task.time_in_state()));
    let file = file!();
    assert_eq!(
        report.to_string(),
        format!(
            "async-stack: stall: task {id} has been running without yielding for {time}\n\
             task {id} \"stuck-root\" [running {time}, 1 polls]:\n\
             \x20   signal_stall::stuck_leaf [async]\n\
             \x20       running\n\
             \x20 stuck-root [async]\n\
             \x20     awaiting at {file}:{STUCK_AWAIT}:20\n\
             \x20 root future defined at {file}:{}:10\n",
            STUCK_AWAIT - 1
        )
    );
    // One stall, one report: the watchdog keeps checking while it is stuck.
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        report_rx.try_recv().is_err(),
        "the same stall was reported twice"
    );
    release_tx.send(()).unwrap();
    t.join().unwrap();
    watchdog.stop();
}

#[traced_async(name = "idle-root")]
async fn idle_root(rx: futures::channel::oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[test]
fn watchdog_optionally_reports_long_idle_tasks() {
    use futures::task::LocalSpawnExt;
    let (report_tx, report_rx) = mpsc::channel::<StallReport>();
    let _watchdog = Watchdog::builder()
        .running_threshold(Duration::from_secs(3600))
        .idle_threshold(Duration::from_millis(20))
        .on_stall(move |r| {
            if r.task.name.as_deref() == Some("idle-root") {
                let _ = report_tx.send(r.clone());
            }
        })
        .spawn()
        .unwrap();
    let mut pool = futures::executor::LocalPool::new();
    let (tx, rx) = futures::channel::oneshot::channel();
    pool.spawner().spawn_local(idle_root(rx)).unwrap();
    pool.run_until_stalled();
    let report = report_rx.recv_timeout(PATIENCE).expect("no idle report");
    assert_eq!(report.kind, StallKind::Idle);
    assert_eq!(report.task.state, TaskState::Idle);
    assert!(report.to_string().contains("has been idle for"));
    drop(tx);
    pool.run();
}

#[test]
fn watchdog_rejects_zero_thresholds() {
    let err = Watchdog::builder()
        .running_threshold(Duration::ZERO)
        .spawn()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "stall thresholds must be greater than zero"
    );
    let err = Watchdog::builder()
        .idle_threshold(Duration::ZERO)
        .spawn()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[traced_async(name = "signal-root")]
async fn signal_root(rx: futures::channel::oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[test]
fn a_signal_writes_a_dump_to_the_configured_file() {
    use async_stack::signal::{DumpTarget, dump_on_to};
    use futures::task::LocalSpawnExt;
    let dir = std::env::temp_dir().join(format!("async-stack-signal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.txt");
    let _ = std::fs::remove_file(&path);
    let dumper = dump_on_to(signal_hook::consts::SIGUSR2, DumpTarget::File(path.clone())).unwrap();

    let mut pool = futures::executor::LocalPool::new();
    let (tx, rx) = futures::channel::oneshot::channel();
    pool.spawner().spawn_local(signal_root(rx)).unwrap();
    pool.run_until_stalled();

    signal_hook::low_level::raise(signal_hook::consts::SIGUSR2).unwrap();
    let mut text = String::new();
    for _ in 0..6000 {
        text = std::fs::read_to_string(&path).unwrap_or_default();
        // Written in several writes: wait for the last, the empty line.
        if text.contains("signal-root") && text.ends_with("\n\n") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        text.starts_with(&format!(
            "async-stack: task dump on signal {}\n",
            signal_hook::consts::SIGUSR2
        )),
        "{text}"
    );
    assert!(text.contains(" \"signal-root\" [idle "), "{text}");
    assert!(text.contains("signal-root [async]"), "{text}");
    // The streamed dump, then an empty line.
    assert!(text.ends_with("\n\n"), "{text:?}");
    dumper.stop();
    drop(tx);
    pool.run();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn signal_dumps_reject_bad_signals_and_unwritable_files() {
    use async_stack::signal::{DumpTarget, dump_on, dump_on_to};
    for bad in [
        signal_hook::consts::SIGKILL,
        signal_hook::consts::SIGSEGV,
        0,
        -5,
    ] {
        let err = dump_on(bad).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "signal {bad}");
        assert!(
            err.to_string()
                .starts_with(&format!("signal {bad} cannot be handled"))
        );
    }
    let err = dump_on(100_000).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    let err = dump_on_to(
        signal_hook::consts::SIGUSR1,
        DumpTarget::File("/nonexistent-dir/for/sure/dump.txt".into()),
    )
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}
