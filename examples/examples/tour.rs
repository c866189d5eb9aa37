//! The async-stack tour: a small request pipeline on tokio.
//!
//! Each request authenticates, then loads a profile and its orders
//! concurrently (`tokio::join!`), then renders under a timeout. The tour
//! prints:
//!
//! 1. a spliced backtrace captured inside a leaf (`fetch_row`), native and
//!    async frames together, with the exact `.await` lines;
//! 2. a dump of every live task while requests are in flight, taken from
//!    the main thread without pausing anything.
//!
//! Run it with `cargo run --example tour`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_stack::traced_async;
use tokio::sync::Notify;

/// Set once the tour has shown its backtrace.
static SHOWN: AtomicBool = AtomicBool::new(false);

mod storage {
    use super::*;

    /// Reads one row; the first read of an order captures a backtrace here.
    #[traced_async]
    pub async fn fetch_row(table: &'static str, key: u32) -> String {
        tokio::time::sleep(Duration::from_millis(2)).await;
        if table == "orders" && !SHOWN.swap(true, Ordering::SeqCst) {
            let bt = async_stack::backtrace();
            println!("== 1. A backtrace captured inside fetch_row ==");
            print_head(&bt);
        }
        format!("{table}#{key}")
    }

    /// Waits for the (simulated) slow replica; the in-flight requests of
    /// the tour park here while the dump is taken.
    #[traced_async]
    pub async fn wait_for_replica(replica: &Notify) {
        replica.notified().await;
    }
}

/// Prints a backtrace up to the first few executor frames, then counts the
/// rest (`println!("{bt}")` prints them all).
fn print_head(bt: &async_stack::Backtrace) {
    use async_stack::FrameKind;
    let text = bt.to_string();
    let frames = bt.frames();
    let last_async = frames
        .iter()
        .rposition(|f| f.kind() == FrameKind::Async)
        .unwrap_or(0);
    let shown = (last_async + 3).min(frames.len());
    // Each frame is two lines (name, location) except those without one.
    let mut lines = text.lines().peekable();
    let mut printed = 0;
    while let Some(line) = lines.next() {
        println!("{line}");
        if lines.peek().is_some_and(|l| {
            l.trim_start().starts_with("at ") || l.trim_start().starts_with("awaiting at ")
        }) {
            println!("{}", lines.next().unwrap_or_default());
        }
        printed += 1;
        if printed == shown {
            break;
        }
    }
    println!("      ... {} more executor frames\n", frames.len() - shown);
}

mod service {
    use super::storage::{fetch_row, wait_for_replica};
    use super::*;

    #[traced_async]
    pub async fn authenticate(user: u32) -> bool {
        fetch_row("sessions", user)
            .await
            .ends_with(&user.to_string())
    }

    #[traced_async]
    pub async fn load_profile(user: u32) -> String {
        fetch_row("profiles", user).await
    }

    #[traced_async]
    pub async fn load_orders(user: u32, replica: &Notify) -> Vec<String> {
        let first = fetch_row("orders", user).await;
        if user > 1 {
            wait_for_replica(replica).await;
        }
        vec![first]
    }

    #[traced_async]
    pub async fn render(profile: String, orders: Vec<String>) -> String {
        tokio::task::yield_now().await;
        format!("{profile}: {} orders", orders.len())
    }
}

/// One request through the pipeline.
#[traced_async]
async fn handle_request(user: u32, replica: &'static Notify) -> Result<String, &'static str> {
    if !service::authenticate(user).await {
        return Err("unauthenticated");
    }
    let (profile, orders) = tokio::join!(
        service::load_profile(user),
        service::load_orders(user, replica)
    );
    tokio::time::timeout(Duration::from_secs(5), service::render(profile, orders))
        .await
        .map_err(|_| "render timed out")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    async_stack::panic::install();
    // Record who wakes whom (section 3).
    async_stack::wake::record(true);
    let replica: &'static Notify = Box::leak(Box::new(Notify::new()));

    // 1. One request end to end; fetch_row prints a spliced backtrace.
    let first = async_stack::tokio::spawn_named("request-1", handle_request(1, replica));
    println!("request 1 -> {:?}\n", first.await.unwrap());

    // 2. Three requests that park on the slow replica, then a dump.
    let handles: Vec<_> = (2..=4)
        .map(|user| {
            async_stack::tokio::spawn_named(
                format!("request-{user}"),
                handle_request(user, replica),
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let dump = async_stack::dump().with_name_containing("request-");
    println!("== 2. Every live task, while requests wait for the replica ==\n{dump}");
    println!("== The same dump, identical stacks coalesced ({{:#}}) ==\n{dump:#}");

    replica.notify_waiters();
    for (user, h) in (2..).zip(handles) {
        println!("request {user} -> {:?}", h.await.unwrap());
    }

    // 3. The wake graph of the run, folded by task name.
    async_stack::wake::record(false);
    let graph = async_stack::wake::graph().fold(async_stack::wake::Fold::Name);
    println!("\n== 3. Who woke whom (async_stack::wake), tasks folded by name ==");
    let label = |from: async_stack::wake::WakeSource| match from {
        async_stack::wake::WakeSource::Task(id) => {
            graph.task(id).map_or("?", |t| &t.label).to_owned()
        }
        async_stack::wake::WakeSource::Runtime => "runtime (I/O or timer driver)".to_owned(),
        async_stack::wake::WakeSource::Thread => "other thread".to_owned(),
    };
    for t in &graph.tasks {
        println!(
            "{:<12} ×{} polls {:>3}  busy {:>9.3?}  idle {:>9.3?}  woken by: {}",
            t.label,
            t.instances,
            t.total_poll_count,
            t.busy(),
            t.idle(),
            graph
                .edges
                .iter()
                .filter(|e| e.to == t.id)
                .map(|e| format!("{} ×{}", label(e.from), e.wakes))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
