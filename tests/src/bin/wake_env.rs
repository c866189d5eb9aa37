//! Helper for `tests/tests/wake_env.rs`: runs a task that a second one
//! wakes twice, then prints whether recording is on and the edges the
//! wake graph holds between them.

use async_stack::TracedExt;
use async_stack::wake::{self, WakeSource};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u8>();
    let listener = async_stack::tokio::spawn_named(
        "env-listener",
        async move { while rx.recv().await.is_some() {} }.traced(),
    );
    tokio::task::yield_now().await;
    async_stack::tokio::spawn_named(
        "env-sender",
        async move {
            tx.send(1).unwrap();
        }
        .traced(),
    )
    .await
    .unwrap();
    listener.await.unwrap();
    let g = wake::graph();
    let id = |label: &str| g.tasks_labelled(label).first().map(|t| t.id);
    let wakes = match (id("env-sender"), id("env-listener")) {
        (Some(from), Some(to)) => g
            .edges
            .iter()
            .filter(|e| e.from == WakeSource::Task(from) && e.to == to)
            .map(|e| e.wakes)
            .sum(),
        _ => 0,
    };
    println!("recording: {}", wake::is_recording());
    println!("tasks: {}", g.tasks.len());
    println!("sender woke listener: {wakes}");
}
