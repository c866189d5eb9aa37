//! The wake graph of plain `tokio::spawn` tasks: every traced root polled
//! inside one tokio task is one node, that tokio task's, and edges to and
//! from any of its roots are edges of that node. Roots outside a tokio
//! task stay nodes of their own.
//!
//! Each test resets the process-wide recording and looks at the whole
//! graph, so the tests of this file run one at a time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

mod common;

use async_stack::traced_async;
use async_stack::wake::{self, TaskNode, WakeGraph, WakeSource};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

// A self-wake (from inside the poll), which lets every other task run
// first on a current-thread runtime.
use common::yield_once;

/// Held by each test for its whole run: the graph is the process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Starts recording from nothing.
fn start() -> std::sync::MutexGuard<'static, ()> {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    wake::record(true);
    wake::reset();
    guard
}

/// Counts the polls of the future it wraps (a root: the wrapper is not
/// traced).
struct Counted<F>(F, Arc<AtomicU32>);

impl<F: Future + Unpin> Future for Counted<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.1.fetch_add(1, Ordering::Relaxed);
        Pin::new(&mut self.0).poll(cx)
    }
}

/// Sends `n` messages, yielding three times after each so that every
/// task down the chain runs, and parks again, before the next one.
#[traced_async]
async fn feeder(tx: UnboundedSender<u32>, n: u32) {
    for i in 0..n {
        tx.send(i).unwrap();
        for _ in 0..3 {
            yield_once().await;
        }
    }
}

/// Passes every message on; returns how many.
async fn pass_on(mut rx: UnboundedReceiver<u32>, tx: UnboundedSender<u32>) -> u32 {
    let mut got = 0;
    while let Some(m) = rx.recv().await {
        got += 1;
        tx.send(m).unwrap();
    }
    got
}

/// Passes every message on, from the feeder.
#[traced_async]
async fn consumer(rx: UnboundedReceiver<u32>, tx: UnboundedSender<u32>) -> u32 {
    pass_on(rx, tx).await
}

/// Passes every message on, to the sink.
#[traced_async]
async fn producer(rx: UnboundedReceiver<u32>, tx: UnboundedSender<u32>) -> u32 {
    pass_on(rx, tx).await
}

/// Counts the messages.
#[traced_async]
async fn sink(mut rx: UnboundedReceiver<u32>) -> u32 {
    let mut got = 0;
    while rx.recv().await.is_some() {
        got += 1;
    }
    got
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The one node whose root is the function `root` of this file.
fn rooted<'a>(g: &'a WakeGraph, root: &str) -> &'a TaskNode {
    let root = format!("wake_tokio::{root}");
    let found: Vec<_> = g
        .tasks
        .iter()
        .filter(|t| t.root.as_deref() == Some(root.as_str()))
        .collect();
    assert_eq!(found.len(), 1, "{root}: {}", g.to_json());
    found[0]
}

/// Every edge, as `(from, to, wakes)`.
fn edges(g: &WakeGraph) -> Vec<(WakeSource, u64, u64)> {
    g.edges.iter().map(|e| (e.from, e.to, e.wakes)).collect()
}

/// Runs `feeder` → `consumer` → `producer` → `sink` with `n` messages on
/// `rt`: `feeder` is the `block_on` root (in no tokio task), `consumer`
/// and `producer` the two branches of one `tokio::join!` in a plain
/// `tokio::spawn`, and `sink` a plain spawn of its own. Checks that the
/// graph has exactly three nodes, the tokio ids of `JoinHandle::id()`,
/// and none for the feeder; returns the graph and how many times the two
/// branches were polled.
fn run_chain(rt: &tokio::runtime::Runtime, n: u32) -> (WakeGraph, u32) {
    let branch_polls = Arc::new(AtomicU32::new(0));
    let polls = branch_polls.clone();
    let (entry_id, sink_id) = rt.block_on(async {
        let (to_consumer, from_feeder) = unbounded_channel();
        let (to_producer, from_consumer) = unbounded_channel();
        let (to_sink, from_producer) = unbounded_channel();
        let sink = tokio::spawn(sink(from_producer));
        let entry = tokio::spawn(async move {
            tokio::join!(
                Counted(Box::pin(consumer(from_feeder, to_producer)), polls.clone()),
                Counted(Box::pin(producer(from_consumer, to_sink)), polls)
            )
        });
        let ids = (entry.id().to_string(), sink.id().to_string());
        // On a current-thread runtime, both spawned tasks park on their
        // empty channels first.
        yield_once().await;
        feeder(to_consumer, n).await;
        assert_eq!(entry.await.unwrap(), (n, n));
        assert_eq!(sink.await.unwrap(), n);
        ids
    });
    let g = wake::graph();
    assert_eq!(g.tasks.len(), 3, "{}", g.to_json());
    // `producer` is no node of its own: it is a branch of the entry, whose
    // first branch (polled first by `join!`) is `consumer`.
    assert!(
        g.tasks
            .iter()
            .all(|t| t.root.as_deref() != Some("wake_tokio::producer"))
    );
    let id = |root: &str| rooted(&g, root).tokio_id.map(|id| id.to_string());
    assert_eq!(id("consumer"), Some(entry_id));
    assert_eq!(id("sink"), Some(sink_id));
    // The `block_on` root runs in no tokio task: a node as before.
    assert_eq!(id("feeder"), None);
    (g, branch_polls.load(Ordering::Relaxed))
}

#[test]
fn the_roots_of_a_plain_spawn_are_one_node_with_its_tokio_id() {
    let _one = start();
    let (g, branch_polls) = run_chain(&current_thread(), 3);
    let feeder = rooted(&g, "feeder");
    let entry = rooted(&g, "consumer");
    let sink = rooted(&g, "sink");
    assert_eq!(entry.label, "wake_tokio::consumer");
    // Three messages and the close of each channel: four wakes per hop.
    // `consumer` waking `producer` is the tokio task waking itself from
    // inside its poll: self-wakes of its node, not an edge.
    let mut expected = vec![
        (WakeSource::Task(feeder.id), entry.id, 4),
        (WakeSource::Task(entry.id), sink.id, 4),
    ];
    expected.sort_by_key(|&(from, to, _)| (to, from));
    assert_eq!(edges(&g), expected);
    assert_eq!((entry.wakes, entry.self_wakes), (4, 4), "{entry:?}");
    // The polls of both branches, summed; a tokio task counts once.
    assert_eq!(entry.total_poll_count, u64::from(branch_polls), "{entry:?}");
    assert_eq!((entry.instances, entry.live, entry.lost_wakers), (1, 0, 0));
    // The feeder yields three times after each send.
    assert_eq!((feeder.wakes, feeder.self_wakes), (0, 9));

    // Both forms name the tokio task.
    let id = entry.tokio_id.unwrap();
    let json = g.to_json();
    assert!(json.contains(&format!("\"tokio_id\": {id},")), "{json}");
    assert!(json.contains("\"tokio_id\": null,"), "{json}");
    let dot = g.to_dot();
    assert!(
        dot.contains(&format!(
            "  t{} [shape=box, label=\"wake_tokio::consumer\\ntokio task {id}\\nbusy ",
            entry.id
        )),
        "{dot}"
    );
    assert!(
        dot.contains(&format!(
            "  t{} [shape=box, label=\"wake_tokio::feeder\\nbusy ",
            feeder.id
        )),
        "{dot}"
    );
}

/// The same tasks outside tokio, on `futures`' `LocalPool`: the two
/// branches of the `join!` are two nodes, and `consumer` waking `producer`
/// is an edge between them.
#[test]
fn outside_tokio_each_root_stays_a_node_of_its_own() {
    use futures::task::LocalSpawnExt;
    let _one = start();
    let mut pool = futures::executor::LocalPool::new();
    let spawner = pool.spawner();
    let (to_consumer, from_feeder) = unbounded_channel();
    let (to_producer, from_consumer) = unbounded_channel();
    let (to_sink, from_producer) = unbounded_channel();
    let sink = spawner
        .spawn_local_with_handle(sink(from_producer))
        .unwrap();
    let entry = spawner
        .spawn_local_with_handle(async move {
            futures::join!(
                consumer(from_feeder, to_producer),
                producer(from_consumer, to_sink)
            )
        })
        .unwrap();
    pool.run_until_stalled();
    pool.run_until(feeder(to_consumer, 3));
    assert_eq!(pool.run_until(entry), (3, 3));
    assert_eq!(pool.run_until(sink), 3);
    let g = wake::graph();
    assert_eq!(g.tasks.len(), 4, "{}", g.to_json());
    assert!(g.tasks.iter().all(|t| t.tokio_id.is_none()));
    let [feeder, consumer, producer, sink] =
        ["feeder", "consumer", "producer", "sink"].map(|f| rooted(&g, f).id);
    let mut expected = vec![
        (WakeSource::Task(feeder), consumer, 4),
        (WakeSource::Task(consumer), producer, 4),
        (WakeSource::Task(producer), sink, 4),
    ];
    expected.sort_by_key(|&(from, to, _)| (to, from));
    assert_eq!(edges(&g), expected);
}

/// Roots polled one after another by one tokio task (an untraced loop
/// calling a traced fn) are one node across all of them, ended or not.
#[test]
fn sequential_roots_of_one_tokio_task_are_one_node() {
    let _one = start();
    let (entry_id, first_polls) = current_thread().block_on(async {
        let (tx, rx) = unbounded_channel();
        let entry = tokio::spawn(async move {
            let mut rx = Some(rx);
            let mut n = 0;
            for _ in 0..3 {
                // Each call is a root of its own, ended before the next.
                let (to_sink, _sunk) = unbounded_channel::<u32>();
                let (one_tx, one_rx) = unbounded_channel();
                one_tx.send(n).unwrap();
                drop(one_tx);
                n += producer(one_rx, to_sink).await;
            }
            n += sink(rx.take().unwrap()).await;
            n
        });
        let id = entry.id().to_string();
        yield_once().await;
        tx.send(7).unwrap();
        drop(tx);
        (id, entry.await.unwrap())
    });
    assert_eq!(first_polls, 4);
    let g = wake::graph();
    assert_eq!(g.tasks.len(), 1, "{}", g.to_json());
    let t = &g.tasks[0];
    assert_eq!(t.tokio_id.map(|id| id.to_string()), Some(entry_id));
    // The first root's function names it; its roots' polls add up (each
    // `producer` finds its message and the closed channel in one poll;
    // `sink` parks once, is woken by the send and by the close).
    assert_eq!(t.root.as_deref(), Some("wake_tokio::producer"));
    assert_eq!((t.instances, t.live), (1, 0));
    assert_eq!(t.total_poll_count, 3 + 2, "{t:?}");
    assert_eq!(edges(&g), [(WakeSource::Runtime, t.id, 1)]);
}

/// On a multi-thread runtime the branches of one tokio task may be polled
/// on different workers from one poll to the next: still one node. (How
/// often a receiver was parked when a message came depends on the
/// workers' timing, so only the edges' ends are fixed.)
#[test]
fn on_a_multi_thread_runtime_the_roots_of_a_spawn_are_one_node() {
    let _one = start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (g, branch_polls) = run_chain(&rt, 20);
    let feeder = rooted(&g, "feeder");
    let entry = rooted(&g, "consumer");
    let sink = rooted(&g, "sink");
    assert_eq!(entry.total_poll_count, u64::from(branch_polls));
    let allowed = [
        (WakeSource::Task(feeder.id), entry.id),
        (WakeSource::Task(entry.id), sink.id),
    ];
    for (from, to, wakes) in edges(&g) {
        assert!(allowed.contains(&(from, to)), "{}", g.to_json());
        assert!((1..=21).contains(&wakes), "{}", g.to_json());
    }
    // Every wake of a node is on an edge into it (none came from a task
    // the graph forgot).
    for t in [entry, sink] {
        let into: u64 = g
            .edges
            .iter()
            .filter(|e| e.to == t.id)
            .map(|e| e.wakes)
            .sum();
        assert_eq!(t.wakes, into, "{t:?}");
    }
}
