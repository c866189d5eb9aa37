//! The known program of the wake-graph workflow (the `wakes` example and
//! the `wake_replay` test run it): 1 producer feeding 4 consumers through
//! channels, 2 independent request/response pairs, and 1 timer-driven
//! task, each spawned under its name. Times are milliseconds long so that
//! tokio's 1 ms timer is small beside them, and the whole program keeps
//! about half of one worker busy, so that consumers keep up with their
//! producers (run it on a one-worker runtime: see `wake_replay.rs`).

use std::time::{Duration, Instant};

use async_stack::TracedExt;
use tokio::sync::{mpsc, oneshot};

/// How long the program runs.
pub const RUN: Duration = Duration::from_millis(2500);

/// The rounds each loop of the program runs at least, however little of
/// `RUN` its worker got (a loaded machine), so that its wakes always show
/// its groups.
const MIN_ROUNDS: u32 = 20;

/// A loop's condition: on until `end` has passed and it ran
/// [`MIN_ROUNDS`] rounds.
struct Until {
    end: Instant,
    rounds: u32,
}

impl Until {
    fn new(end: Instant) -> Self {
        Until { end, rounds: 0 }
    }

    /// Whether to run one more round.
    fn more(&mut self) -> bool {
        self.rounds += 1;
        self.rounds <= MIN_ROUNDS || Instant::now() < self.end
    }
}

fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn spawn<F>(name: &str, fut: F) -> async_stack::tokio::JoinHandle<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    async_stack::tokio::spawn_named(name, fut.traced())
}

/// The known program, until `RUN` has passed (and each loop ran
/// [`MIN_ROUNDS`] rounds).
pub async fn program() {
    let end = Instant::now() + RUN;
    let mut tasks = Vec::new();
    // 1 producer → 4 consumers.
    let mut senders = Vec::new();
    for _ in 0..4 {
        let (tx, mut rx) = mpsc::channel::<u32>(16);
        senders.push(tx);
        tasks.push(spawn("consumer", async move {
            while rx.recv().await.is_some() {
                spin(Duration::from_millis(1));
            }
        }));
    }
    tasks.push(spawn("producer", async move {
        let mut until = Until::new(end);
        while until.more() {
            spin(Duration::from_millis(1));
            for tx in &senders {
                tx.send(1).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    }));
    // 2 request/response pairs.
    for pair in 1..=2 {
        let (tx, mut rx) = mpsc::channel::<oneshot::Sender<u32>>(1);
        tasks.push(spawn(&format!("server-{pair}"), async move {
            while let Some(reply) = rx.recv().await {
                spin(Duration::from_millis(1));
                let _ = reply.send(1);
            }
        }));
        tasks.push(spawn(&format!("client-{pair}"), async move {
            let mut until = Until::new(end);
            while until.more() {
                spin(Duration::from_micros(500));
                let (reply, answer) = oneshot::channel();
                tx.send(reply).await.unwrap();
                answer.await.unwrap();
                tokio::time::sleep(Duration::from_millis(12)).await;
            }
        }));
    }
    // 1 timer-driven task.
    tasks.push(spawn("ticker", async move {
        let mut until = Until::new(end);
        while until.more() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            spin(Duration::from_millis(1));
        }
    }));
    for t in tasks {
        t.await.unwrap();
    }
}
