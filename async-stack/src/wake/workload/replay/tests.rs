//! Replays: the tasks a dump sees while a replay runs (names and counts
//! exactly as the workload says), and that none is left once it ends.
//! No assertion here depends on timing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::super::{Consumer, Group, Independent, Producer, Workload};
use super::{Role, replay, replay_until};

/// One producer with three consumer instances, a request/response pair
/// and an independent task, all named with `prefix`.
fn small(prefix: &str) -> Workload {
    Workload {
        version: 1,
        duration_ms: 300,
        groups: vec![
            Group {
                name: format!("{prefix}fan"),
                producer: Producer {
                    name: format!("{prefix}producer"),
                    busy_us_per_cycle: 100,
                    sleep_us_per_cycle: 2_000,
                    fan_out: 3,
                    waits_for_replies: false,
                },
                consumers: vec![Consumer {
                    name: format!("{prefix}consumer"),
                    instances: 3,
                    busy_us_per_wake: 200,
                }],
            },
            Group {
                name: format!("{prefix}rpc"),
                producer: Producer {
                    name: format!("{prefix}client"),
                    busy_us_per_cycle: 50,
                    sleep_us_per_cycle: 0,
                    fan_out: 1,
                    waits_for_replies: true,
                },
                consumers: vec![Consumer {
                    name: format!("{prefix}server"),
                    instances: 1,
                    busy_us_per_wake: 100,
                }],
            },
        ],
        independent: vec![Independent {
            name: format!("{prefix}tick"),
            instances: 1,
            busy_us_per_wake: 100,
            period_us: 5_000,
        }],
    }
}

/// Live tasks of the current dump whose name starts with `prefix`, by name.
fn live(prefix: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for t in crate::read::dump::dump().tasks {
        if let Some(name) = t.name.filter(|n| n.starts_with(prefix)) {
            *counts.entry(name).or_default() += 1;
        }
    }
    counts
}

/// Waits (up to 60 s, for a loaded machine) until no task named with
/// `prefix` is live, and returns what is left.
async fn wait_until_gone(prefix: &str) -> BTreeMap<String, usize> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = live(prefix);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_runs_each_entry_as_named_tasks_and_ends_them_all() {
    const PREFIX: &str = "wl-structure-";
    let workload = small(PREFIX);
    let expected: BTreeMap<String, usize> = [
        ("producer", 1),
        ("consumer", 3),
        ("client", 1),
        ("server", 1),
        ("tick", 1),
    ]
    .into_iter()
    .map(|(n, c)| (format!("{PREFIX}{n}"), c))
    .collect();

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        let stop = async {
            let _ = stop_rx.await;
        };
        replay_until(&workload, stop).await
    });

    // Sample dumps for at least 300 ms and until every task has been seen
    // (a task appears in dumps from its first poll), keeping the most of
    // each name seen at once: never more than its instances, and all of
    // them at some point.
    let start = Instant::now();
    let mut most: BTreeMap<String, usize> = BTreeMap::new();
    loop {
        for (name, n) in live(PREFIX) {
            let m = most.entry(name).or_default();
            *m = (*m).max(n);
        }
        let waited = start.elapsed();
        if (most == expected && waited >= Duration::from_millis(300))
            || waited > Duration::from_secs(60)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(most, expected);

    stop_tx.send(()).unwrap();
    let report = run.await.unwrap().unwrap();
    // Nothing is left as soon as the replay returns: no waiting here.
    assert_eq!(live(PREFIX), BTreeMap::new());

    let entries: Vec<(&str, Role, u32)> = report
        .tasks
        .iter()
        .map(|t| (t.name.strip_prefix(PREFIX).unwrap(), t.role, t.instances))
        .collect();
    assert_eq!(
        entries,
        [
            ("producer", Role::Producer, 1),
            ("consumer", Role::Consumer, 3),
            ("client", Role::Producer, 1),
            ("server", Role::Consumer, 1),
            ("tick", Role::Independent, 1),
        ]
    );
    let shown = report.to_string();
    assert!(shown.starts_with("replayed "), "{shown}");
    assert!(shown.contains(" 7 tasks\n"), "{shown}");
    assert_eq!(shown.lines().count(), 6, "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_replay_ends_its_tasks() {
    const PREFIX: &str = "wl-dropped-";
    let workload = small(PREFIX);
    let replay = replay_until(&workload, std::future::pending());
    // The timeout drops the replay's future mid-way.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), replay)
            .await
            .is_err()
    );
    assert_eq!(wait_until_gone(PREFIX).await, BTreeMap::new());
}

#[tokio::test(flavor = "current_thread")]
async fn replay_rejects_an_invalid_workload_without_spawning() {
    const PREFIX: &str = "wl-invalid-";
    let mut workload = small(PREFIX);
    workload.groups[0].consumers[0].instances = 0;
    let err = replay(&workload, Duration::from_secs(3600))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "groups[0].consumers[0].instances: must be between 1 and 10000, got 0"
    );
    assert_eq!(live(PREFIX), BTreeMap::new());
}

/// A stop in the middle of a long burn ends it at once rather than
/// waiting it out (60 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_interrupts_long_busy_times() {
    const PREFIX: &str = "wl-long-";
    let mut workload = small(PREFIX);
    // One worker spins for 60 s per message; the other stays free to run
    // the replay's other tasks.
    workload.groups[0].consumers[0].instances = 1;
    workload.groups[0].consumers[0].busy_us_per_wake = Workload::MAX_TIME_US;
    // Stopped once the consumer is in its burn (running in a dump), so
    // that the stop falls inside it however late the burn starts.
    let burning = async {
        let consumer = format!("{PREFIX}consumer");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !crate::read::dump::dump().tasks.iter().any(|t| {
            t.name.as_deref() == Some(consumer.as_str())
                && t.state == crate::task::TaskState::Running
        }) {
            assert!(Instant::now() < deadline, "the consumer never burnt");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    let report = replay_until(&workload, burning).await.unwrap();
    assert_eq!(live(PREFIX), BTreeMap::new());
    let consumer = &report.tasks[1];
    assert_eq!(consumer.role, Role::Consumer);
    // It burnt, and was cut short: less than one burn in all.
    assert!(consumer.busy > Duration::ZERO);
    assert!(
        consumer.busy < Duration::from_micros(Workload::MAX_TIME_US),
        "{:?}",
        consumer.busy
    );
}
