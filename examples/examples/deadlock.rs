//! `cargo run --example deadlock`: two transfers take the same two locks in
//! opposite orders, and wait for each other for good. Nothing crashes and
//! nothing is logged; `async_stack::deadlocks()` names both tasks, both
//! locks and the four lines involved, and the dump shows each task's wait
//! under the frame that awaits it.
//!
//! The locks are `async_stack::sync::Mutex`, a drop-in for
//! `tokio::sync::Mutex` that records who holds it and who waits for it.

use std::sync::Arc;
use std::time::Duration;

use async_stack::sync::Mutex;
use async_stack::traced_async;
use tokio::sync::Barrier;

/// Moves one unit from `from` to `to`, holding both accounts' locks.
#[traced_async]
async fn transfer(from: Arc<Mutex<u64>>, to: Arc<Mutex<u64>>, both_locked: Arc<Barrier>) {
    let mut source = from.lock().await;
    // Both transfers hold their first lock before either takes its second:
    // the inversion happens every run, not by chance.
    both_locked.wait().await;
    let mut target = to.lock().await;
    *source -= 1;
    *target += 1;
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let alice = Arc::new(Mutex::new(100));
    let bob = Arc::new(Mutex::new(100));
    let barrier = Arc::new(Barrier::new(2));
    let first = async_stack::tokio::spawn_named(
        "alice to bob",
        transfer(alice.clone(), bob.clone(), barrier.clone()),
    );
    let second = async_stack::tokio::spawn_named(
        "bob to alice",
        transfer(bob.clone(), alice.clone(), barrier.clone()),
    );

    // Give the two transfers their turns until they are stuck (at most a
    // few seconds: the example never hangs).
    let mut found = Vec::new();
    for _ in 0..5_000 {
        found = async_stack::deadlocks();
        if !found.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    if found.is_empty() {
        eprintln!("no deadlock formed: the transfers did not run?");
        std::process::exit(1);
    }
    // Let the deadlock age a little, so that the dump's times say so.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for d in &found {
        println!("{d}\n");
    }

    println!("The same two tasks in a dump:\n");
    let dump = async_stack::dump();
    for id in found.iter().flat_map(|d| d.tasks()) {
        if let Some(task) = dump.task(id) {
            println!("{task}");
        }
    }

    // Aborting one transfer drops its locks: the other completes.
    first.abort();
    let _ = first.await;
    second.await.expect("the second transfer completes");
    println!(
        "after aborting the first transfer: alice {}, bob {}, deadlocks: {}",
        *alice.lock().await,
        *bob.lock().await,
        async_stack::deadlocks().len()
    );
}
