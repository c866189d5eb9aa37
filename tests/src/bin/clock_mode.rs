//! Helper for `tests/tests/clock_env.rs`: runs one traced task, then prints
//! whether the process has an `async-stack-clock` thread and the state the
//! dump gives the task.

use async_stack::traced_async;

#[traced_async(name = "clock-probe")]
async fn probe() {
    std::future::pending::<()>().await;
}

/// Whether a thread of this process is named `async-stack-clock` (Linux
/// keeps the first 15 bytes of a thread's name).
fn has_ticker() -> bool {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .any(|comm| comm.trim() == "async-stack-clo")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let task = tokio::spawn(probe());
    tokio::task::yield_now().await;
    // The ticker starts with the first stamp; give it time to show up.
    let mut ticker = has_ticker();
    for _ in 0..200 {
        if ticker {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        ticker = has_ticker();
    }
    let dump = async_stack::dump().with_name_containing("clock-probe");
    println!("ticker: {}", if ticker { "yes" } else { "no" });
    println!("state: {}", dump.tasks[0].state);
    task.abort();
}
