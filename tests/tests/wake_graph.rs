//! The wake graph as a user reads it: edges between named tasks, outside
//! sources, self-wakes, waker clones and drops, lost wakers, busy time and
//! slow polls, and the DOT drawing rendered by Graphviz's `dot`.
//!
//! Recording is process-wide, so every test here turns it on and none
//! turns it off; each test looks only at the tasks it names.

use std::future::Future;
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use async_stack::TracedExt;
use async_stack::wake::{self, Fold, TaskNode, WakeGraph, WakeSource};

fn start() {
    static SLOW: Once = Once::new();
    SLOW.call_once(|| wake::set_slow_poll_threshold(Duration::from_millis(1)));
    wake::record(true);
}

/// Spawns `fut` as a traced task named `name`.
#[track_caller]
fn spawn<F>(name: &str, fut: F) -> async_stack::tokio::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    async_stack::tokio::spawn_named(name, fut.traced())
}

/// Wakes its task from inside the poll and returns `Pending` once: a
/// self-wake. (`tokio::task::yield_now` defers its wake to the scheduler,
/// after the poll: a wake from the runtime.)
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The one task labelled `label` in `g`.
fn only<'a>(g: &'a WakeGraph, label: &str) -> &'a TaskNode {
    let found = g.tasks_labelled(label);
    assert_eq!(
        found.len(),
        1,
        "tasks labelled {label}: {found:?} in {}",
        g.to_json()
    );
    found[0]
}

/// Wakes of `to` from `from`.
fn wakes(g: &WakeGraph, from: WakeSource, to: u64) -> u64 {
    g.edges
        .iter()
        .filter(|e| e.from == from && e.to == to)
        .map(|e| e.wakes)
        .sum()
}

/// Edges into `to`.
fn edges_into(g: &WakeGraph, to: u64) -> Vec<(WakeSource, u64)> {
    g.edges
        .iter()
        .filter(|e| e.to == to)
        .map(|e| (e.from, e.wakes))
        .collect()
}

#[test]
fn a_producer_wakes_its_consumer_once_per_message() {
    start();
    runtime().block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(8);
        let consumer = spawn("graph-consumer", async move {
            let mut got = 0;
            while rx.recv().await.is_some() {
                got += 1;
            }
            got
        });
        // Let the consumer park on its empty channel first.
        yield_now().await;
        let producer = spawn("graph-producer", async move {
            for i in 0..5 {
                tx.send(i).await.unwrap();
                // The consumer runs (and parks again) before the next send.
                yield_now().await;
            }
        });
        producer.await.unwrap();
        assert_eq!(consumer.await.unwrap(), 5);
    });
    let g = wake::graph();
    let producer = only(&g, "graph-producer");
    let consumer = only(&g, "graph-consumer");
    // Five sends, then the channel closing as the producer ends, each a
    // wake from inside the producer's poll.
    assert_eq!(
        edges_into(&g, consumer.id),
        [(WakeSource::Task(producer.id), 6)]
    );
    assert_eq!(consumer.wakes, 6);
    assert_eq!(consumer.total_poll_count, 7);
    assert_eq!(consumer.self_wakes, 0);
    // Each wake was followed by a poll some time later, and each `Pending`
    // by a wake: both durations were counted.
    assert!(consumer.scheduled() > Duration::ZERO, "{consumer:?}");
    assert!(consumer.idle() > Duration::ZERO, "{consumer:?}");
    // The producer yields five times: self-wakes, not edges.
    assert_eq!(producer.self_wakes, 5);
    assert_eq!(edges_into(&g, producer.id), []);
    assert_eq!((producer.live, consumer.live), (0, 0));
    assert_eq!((producer.lost_wakers, consumer.lost_wakers), (0, 0));
    // Each park of the consumer cloned the waker into the channel.
    assert!(consumer.waker_clones >= 6, "{consumer:?}");
    assert_eq!(consumer.waker_clones, consumer.waker_drops, "{consumer:?}");
}

#[test]
fn wakes_from_a_timer_and_from_a_plain_thread_name_their_source() {
    start();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    runtime().block_on(async {
        let sleeper = spawn("graph-sleeper", async {
            tokio::time::sleep(Duration::from_millis(2)).await;
        });
        let listener = spawn("graph-listener", async move {
            rx.await.unwrap();
        });
        yield_now().await;
        std::thread::spawn(move || tx.send(()).unwrap())
            .join()
            .unwrap();
        sleeper.await.unwrap();
        listener.await.unwrap();
    });
    let g = wake::graph();
    let sleeper = only(&g, "graph-sleeper");
    let listener = only(&g, "graph-listener");
    assert_eq!(edges_into(&g, sleeper.id), [(WakeSource::Runtime, 1)]);
    assert_eq!(edges_into(&g, listener.id), [(WakeSource::Thread, 1)]);
    // Idle from its `Pending` to the timer's wake: at least the sleep.
    assert!(sleeper.idle() >= Duration::from_millis(2), "{sleeper:?}");
}

/// Returns `Pending` on its first poll, doing `with_waker` to the waker.
struct Park<F: FnMut(&Waker)> {
    with_waker: F,
}

impl<F: FnMut(&Waker) + Unpin> Future for Park<F> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        (self.with_waker)(cx.waker());
        Poll::Pending
    }
}

#[test]
fn a_task_left_with_no_waker_is_flagged_lost_and_one_holding_a_clone_is_not() {
    start();
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Waker>::new()));
    let rt = runtime();
    let handles = rt.block_on(async {
        let k = kept.clone();
        let holder = spawn(
            "graph-holder",
            Park {
                with_waker: move |w: &Waker| k.lock().unwrap().push(w.clone()),
            },
        );
        let dropper = spawn(
            "graph-dropper",
            Park {
                with_waker: |w: &Waker| {
                    // Three clones, all dropped before `Pending`.
                    let clones = [w.clone(), w.clone(), w.clone()];
                    drop(clones);
                },
            },
        );
        let forgetter = spawn("graph-forgetter", std::future::pending::<()>());
        for _ in 0..3 {
            yield_now().await;
        }
        (holder, dropper, forgetter)
    });
    let g = wake::graph();
    let holder = only(&g, "graph-holder");
    let dropper = only(&g, "graph-dropper");
    let forgetter = only(&g, "graph-forgetter");
    assert_eq!(
        (holder.lost_wakers, holder.waker_clones, holder.waker_drops),
        (0, 1, 0)
    );
    assert_eq!(
        (
            dropper.lost_wakers,
            dropper.waker_clones,
            dropper.waker_drops
        ),
        (1, 3, 3)
    );
    assert_eq!((forgetter.lost_wakers, forgetter.waker_clones), (1, 0));
    assert_eq!(holder.live + dropper.live + forgetter.live, 3);

    // The holder's clone dropped while it is pending: now nothing can wake
    // it either.
    kept.lock().unwrap().clear();
    let g = wake::graph();
    let holder = only(&g, "graph-holder");
    assert_eq!((holder.lost_wakers, holder.waker_drops), (1, 1));
    // The DOT drawing marks the lost ones.
    let dot = g.to_dot();
    assert!(
        dot.contains(&format!(
            "t{} [shape=box, label=\"graph-holder\\n",
            holder.id
        )),
        "{dot}"
    );
    assert!(dot.contains("lost waker: 1\", color=red"), "{dot}");
    for h in [&handles.0, &handles.1, &handles.2] {
        h.abort();
    }
    drop(rt);
    // Ended tasks are no longer waiting for anything.
    let g = wake::graph();
    for label in ["graph-holder", "graph-dropper", "graph-forgetter"] {
        let t = only(&g, label);
        assert_eq!((t.live, t.lost_wakers), (0, 0), "{t:?}");
    }
}

fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn busy_time_and_slow_polls_count_time_inside_poll() {
    // `tokio::task::yield_now` wakes from the scheduler after the poll.
    start();
    runtime().block_on(async {
        spawn("graph-deferred-yield", async {
            tokio::task::yield_now().await;
        })
        .await
        .unwrap();
    });
    let g = wake::graph();
    let t = only(&g, "graph-deferred-yield");
    assert_eq!(edges_into(&g, t.id), [(WakeSource::Runtime, 1)]);
    assert_eq!(t.self_wakes, 0);

    start();
    runtime().block_on(async {
        spawn("graph-spinner", async {
            for _ in 0..3 {
                spin(Duration::from_millis(3));
                yield_now().await;
            }
        })
        .await
        .unwrap();
    });
    let g = wake::graph();
    let t = only(&g, "graph-spinner");
    // Four polls: three that spin 3 ms (slow, over the 1 ms threshold) and
    // a last one that only returns.
    assert_eq!(t.total_poll_count, 4);
    assert!(t.busy() >= Duration::from_millis(9), "{t:?}");
    assert!(t.total_slow_poll_count >= 3, "{t:?}");
    assert_eq!(t.self_wakes, 3);
}

#[test]
fn folding_merges_tasks_by_name_and_dot_renders_with_graphviz() {
    start();
    let spawn_line = runtime().block_on(async {
        let mut senders = Vec::new();
        let mut workers = Vec::new();
        let mut spawn_line = 0;
        for _ in 0..4 {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
            senders.push(tx);
            spawn_line = line!() + 1;
            workers.push(spawn("fold-worker", async move {
                while rx.recv().await.is_some() {}
            }));
        }
        yield_now().await;
        spawn("fold-boss", async move {
            for tx in &senders {
                tx.send(1).await.unwrap();
            }
            yield_now().await;
        })
        .await
        .unwrap();
        for w in workers {
            w.await.unwrap();
        }
        spawn_line
    });
    let g = wake::graph().fold(Fold::Name);
    let boss = only(&g, "fold-boss");
    let worker = only(&g, "fold-worker");
    assert_eq!(worker.instances, 4);
    // One message each, then the channel closing: 8 wakes from the boss.
    assert_eq!(edges_into(&g, worker.id), [(WakeSource::Task(boss.id), 8)]);
    assert_eq!(wakes(&g, WakeSource::Task(boss.id), worker.id), 8);

    let dot = g.to_dot();
    if let Some(svg) = render_with_dot(&dot) {
        assert!(svg.contains("<svg"), "{svg}");
        assert!(svg.contains("fold&#45;worker ×4"), "{svg}");
    }
    // And the JSON form reads back.
    let back: WakeGraph = serde_json::from_str(&g.to_json()).unwrap();
    assert_eq!(back, g);

    // Folded by spawn site instead: the four workers share one line.
    let by_site = wake::graph().fold(Fold::SpawnSite);
    let node = by_site
        .task(worker.id)
        .expect("the workers' node keeps their smallest id");
    assert_eq!(node.instances, 4);
    assert!(
        node.label
            .starts_with(&format!("tests/tests/wake_graph.rs:{spawn_line}:")),
        "{node:?}"
    );
    assert_eq!(node.name.as_deref(), Some("fold-worker"));
}

/// Runs Graphviz's `dot -Tsvg` on `dot`: `None` (after saying so) when
/// `dot` is missing outside CI; a panic when it is missing under CI
/// (`scripts/test.sh` installs `graphviz`).
fn render_with_dot(dot: &str) -> Option<String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "graphviz `dot` is not installed ({e}): run scripts/test.sh, which installs graphviz"
            );
            eprintln!("wake_graph: graphviz `dot` is not installed, not rendering the DOT");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dot failed: {}\n{dot}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}
