//! A deadlock as each reader shows it: the dump (text and JSON) with each
//! task's wait under the frame that awaits it, the stall watchdog
//! (`deadlocks(true)`) reporting it once, and the debug endpoint's
//! `/debug/async/deadlocks`.

mod common;
mod http_common;

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use async_stack::stall::Watchdog;
use async_stack::sync::Mutex;
use async_stack::{Deadlock, ResourceKind, TaskDump, traced_async};
use tokio::sync::Barrier;

use http_common::get;

/// Upper bound for waiting on a background thread; never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// The line of this file that ends with the comment `// {marker}`.
fn line_of(marker: &str) -> u32 {
    common::marker_line("tests/deadlock_reports.rs", marker)
}

#[traced_async]
async fn transfer(from: Arc<Mutex<u64>>, to: Arc<Mutex<u64>>, both: Arc<Barrier>) {
    let mut source = from.lock().await; // FIRST
    both.wait().await;
    let mut target = to.lock().await; // SECOND
    *source -= 1;
    *target += 1;
}

/// `text` with every duration (`12ms`, `1.5s`, `3m2s`) replaced by `T`.
fn mask_times(text: &str) -> String {
    let mut out = String::new();
    for word in text.split_inclusive([' ', ',', ')', '\n']) {
        let (body, end) = word.split_at(word.len() - 1);
        let end_is_sep = matches!(end, " " | "," | ")" | "\n");
        let (body, end) = if end_is_sep { (body, end) } else { (word, "") };
        let is_time = body.chars().next().is_some_and(|c| c.is_ascii_digit())
            && (body.ends_with("ms") || body.ends_with('s') || body.ends_with('m'))
            && body
                .chars()
                .all(|c| c.is_ascii_digit() || ".hms".contains(c));
        out.push_str(if is_time { "T" } else { body });
        out.push_str(end);
    }
    out
}

#[test]
fn a_deadlock_in_the_dump_the_watchdog_and_the_endpoint() {
    let reports: Arc<StdMutex<Vec<Deadlock>>> = Arc::default();
    let sink = reports.clone();
    let watchdog = Watchdog::builder()
        .interval(Duration::from_millis(2))
        .on_deadlock(move |d| sink.lock().unwrap().push(d.clone()))
        .spawn()
        .unwrap();
    let server = async_stack::http::serve("127.0.0.1:0").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let alice = Arc::new(Mutex::new(100)); // ALICE
        let bob = Arc::new(Mutex::new(100)); // BOB
        let barrier = Arc::new(Barrier::new(2));
        let first = async_stack::tokio::spawn_named(
            "a-to-b",
            transfer(alice.clone(), bob.clone(), barrier.clone()),
        );
        let second = async_stack::tokio::spawn_named(
            "b-to-a",
            transfer(bob.clone(), alice.clone(), barrier.clone()),
        );
        let mut found = None;
        for _ in 0..5_000 {
            found = async_stack::deadlocks().into_iter().find(|d| {
                d.edges
                    .iter()
                    .all(|e| e.waiter_name.as_deref().is_some_and(|n| n.contains("-to-")))
            });
            if found.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let found = found.expect("the inversion deadlocks");
        let tasks = found.tasks();
        assert_eq!(tasks.len(), 2);
        let d = async_stack::dump();
        let a = d.tasks.iter().find(|t| t.name.as_deref() == Some("a-to-b")).unwrap();
        let b = d.tasks.iter().find(|t| t.name.as_deref() == Some("b-to-a")).unwrap();
        assert_eq!(tasks, {
            let mut t = vec![a.id, b.id];
            t.sort_unstable();
            t
        });

        // The dump: each task's wait, under the frame that awaits it.
        let file = "tests/tests/deadlock_reports.rs";
        let at = |marker: &str| format!("{file}:{}:", line_of(marker));
        // Each waits, at its second lock, for the other's first.
        for (t, mine, other) in [(a, "BOB", b), (b, "ALICE", a)] {
            assert_eq!(t.waits.len(), 1, "{t}");
            let w = &t.waits[0];
            assert_eq!(w.resource, ResourceKind::Mutex);
            assert_eq!(w.task, t.id);
            assert_eq!(w.created_at.line, line_of(mine));
            assert_eq!(w.waiting_at.as_ref().map(|l| l.line), Some(line_of("SECOND")));
            assert_eq!(w.holders.len(), 1);
            assert_eq!(w.holders[0].task, other.id);
            assert_eq!(w.holders[0].acquired_at.line, line_of("FIRST"));
            let text = mask_times(&t.to_string());
            let expected = format!(
                "  deadlock_reports::transfer [async]\n      awaiting at {}",
                at("SECOND")
            );
            assert!(text.contains(&expected), "{text}");
            let wait_line = format!(
                "\n      waiting for Mutex created at {}{}, held by task {} (acquired at {}{}, T ago), for T\n",
                at(mine),
                w.created_at.column,
                other.id,
                at("FIRST"),
                w.holders[0].acquired_at.column
            );
            assert!(text.contains(&wait_line), "{text}\nexpected{wait_line}");
            // Under the awaiting frame: right after its `awaiting at` line.
            let awaiting = text.find(&expected).unwrap();
            assert!(text[awaiting..].find(&wait_line).unwrap() < expected.len() + 20, "{text}");
        }
        // The JSON: read back whole, and valid against the schema.
        let json = d.to_json();
        assert_eq!(TaskDump::from_json(&json).unwrap(), d);
        let errors = common::dump_schema_errors(&json);
        assert!(errors.is_empty(), "{errors:?}");

        // The endpoint: the same report.
        let addr = server.local_addr();
        let reply = tokio::task::spawn_blocking(move || get(addr, "/debug/async/deadlocks"))
            .await
            .unwrap();
        assert_eq!(reply.status, 200);
        assert!(reply.text().contains(&found.to_string()), "{}", reply.text());

        // The watchdog: once, however many checks see it. Its thread may
        // get no turn for seconds on a loaded machine: wait for its report
        // (a bound for a stuck test, not a timing assertion).
        let ours = || -> Vec<Deadlock> {
            reports
                .lock()
                .unwrap()
                .iter()
                .filter(|d| d.tasks() == tasks)
                .cloned()
                .collect()
        };
        let start = Instant::now();
        while ours().is_empty() {
            assert!(
                start.elapsed() < PATIENCE,
                "the watchdog did not report the deadlock in {PATIENCE:?}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        let ours = ours();
        assert_eq!(ours.len(), 1, "{ours:?}");
        assert_eq!(ours[0].to_string(), found.to_string());

        // Aborted, the cycle is gone: from deadlocks() and the endpoint.
        first.abort();
        let _ = first.await;
        second.await.unwrap();
        assert!(async_stack::deadlocks().iter().all(|d| d.tasks() != tasks));
        let reply = tokio::task::spawn_blocking(move || get(addr, "/debug/async/deadlocks"))
            .await
            .unwrap();
        assert!(!reply.text().contains("\"a-to-b\""), "{}", reply.text());
    });
    watchdog.stop();
}
