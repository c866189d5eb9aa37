//! Finding a stuck task.
//!
//! Two kinds of "stuck" are staged here:
//!
//! - `transfer` tasks that deadlock on two async mutexes taken in opposite
//!   orders: they are *idle* forever, and a dump (here triggered by
//!   `SIGUSR1`, as `kill -USR1 <pid>` would) shows the `.await` each one is
//!   parked on;
//! - `checksum` blocks its worker thread inside a poll on a
//!   `std::sync::Mutex`: it is *running* forever, and the stall watchdog
//!   reports it with its stack.
//!
//! Run it with `cargo run --example stuck`. It exits by itself.

use std::sync::Arc;
use std::time::Duration;

use async_stack::traced_async;
use tokio::sync::Mutex;

#[traced_async]
async fn transfer(from: Arc<Mutex<u64>>, to: Arc<Mutex<u64>>, amount: u64) {
    let mut a = from.lock().await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut b = to.lock().await;
    *a -= amount;
    *b += amount;
}

#[inline(never)]
fn sum_ledger(ledger: &std::sync::Mutex<Vec<u64>>) -> u64 {
    ledger.lock().unwrap().iter().sum()
}

#[traced_async]
async fn checksum(ledger: Arc<std::sync::Mutex<Vec<u64>>>) -> u64 {
    tokio::task::yield_now().await;
    sum_ledger(&ledger)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _dumper = async_stack::signal::dump_on(signal_hook::consts::SIGUSR1).unwrap();
    let _watchdog = async_stack::stall::Watchdog::builder()
        .running_threshold(Duration::from_millis(200))
        .spawn()
        .unwrap();

    let alice = Arc::new(Mutex::new(100));
    let bob = Arc::new(Mutex::new(100));
    async_stack::tokio::spawn_named("alice->bob", transfer(alice.clone(), bob.clone(), 10));
    async_stack::tokio::spawn_named("bob->alice", transfer(bob, alice, 20));

    // A thread elsewhere takes the ledger lock and does not let go (the
    // staged bug), so `checksum` blocks its worker inside a poll.
    let ledger = Arc::new(std::sync::Mutex::new(vec![1, 2, 3]));
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let holder = ledger.clone();
    std::thread::spawn(move || {
        let _held = holder.lock().unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(3600));
    });
    locked_rx.recv().unwrap();
    async_stack::tokio::spawn_named("checksum", checksum(ledger.clone()));

    // Let the watchdog notice `checksum`, then ask for a dump as an
    // operator would with `kill -USR1`.
    tokio::time::sleep(Duration::from_millis(600)).await;
    eprintln!("\n== sending SIGUSR1 to ourselves ==");
    signal_hook::low_level::raise(signal_hook::consts::SIGUSR1).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::process::exit(0);
}
