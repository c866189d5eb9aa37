//! The endpoint answers while every worker of the application's runtime is
//! blocked inside a poll (`std::thread::sleep`), and shows those tasks
//! running: it has a thread and a runtime of its own, and reading stacks
//! never waits for a task.

mod http_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_stack::traced_async;

use http_common::{entries, get};

static RELEASE: AtomicBool = AtomicBool::new(false);

#[traced_async]
async fn blocker() {
    // Blocks the worker inside this poll until the test is done.
    while !RELEASE.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Releases the blocked workers when dropped: also when an assertion
/// fails, so that the runtime's drop does not wait for them forever.
struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        RELEASE.store(true, Ordering::Release);
    }
}

#[test]
fn the_dump_answers_while_every_worker_is_blocked() {
    let server = async_stack::http::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let _guard = rt.enter();
    // Dropped before the runtime, on every path.
    let release = ReleaseOnDrop;
    let handles: Vec<_> = (0..2)
        .map(|_| async_stack::tokio::spawn_named("blocker", blocker()))
        .collect();
    // Both workers inside `blocker`'s poll.
    while async_stack::dump()
        .with_name_containing("blocker")
        .with_states(&[async_stack::TaskState::Running])
        .tasks
        .len()
        < 2
    {
        std::thread::sleep(Duration::from_millis(5));
    }

    let reply = get(addr, "/debug/pprof/goroutine?debug=2");
    assert_eq!(reply.status, 200);
    let text = reply.text();
    let running: Vec<&str> = entries(text, " \"blocker\" (tokio task ")
        .into_iter()
        .filter(|e| e.contains(") [running "))
        .collect();
    assert_eq!(running.len(), 2, "{text}");
    for entry in running {
        let body = entry.split_once(":\n").unwrap().1;
        assert!(
            body.starts_with("  http_blocked_runtime::blocker [async]\n"),
            "{entry}"
        );
    }
    let json = get(addr, "/debug/async/tasks.json");
    let dump = async_stack::TaskDump::from_json(json.text()).unwrap();
    let blockers = dump
        .tasks
        .iter()
        .filter(|t| t.name.as_deref() == Some("blocker"))
        .filter(|t| t.state == async_stack::TaskState::Running)
        .count();
    assert_eq!(blockers, 2);

    drop(release);
    for h in handles {
        rt.block_on(h).unwrap();
    }
}
