//! `go tool pprof` reads the endpoint's profiles over HTTP: the goroutine
//! profile (one sample per task, at its `.await`, or at its spawn site
//! before its first poll) and a sampler profile of two seconds.
//!
//! Needs Go (`scripts/test.sh` installs `golang-go`). Under CI (`CI` set) a
//! missing `go` fails the test; elsewhere the test says so and passes.

mod go_tool;
mod http_common;

use async_stack::traced_async;

use go_tool::have_go;
use http_common::{park_for_good, queue_for_good};

#[traced_async]
async fn parked_leaf(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[traced_async]
async fn parked(rx: tokio::sync::oneshot::Receiver<()>) {
    parked_leaf(rx).await;
}

/// The rows of `go tool pprof -top`: (flat, function name).
fn top_rows(top: &str) -> Vec<(String, String)> {
    top.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.len() >= 6).then(|| (cols[0].to_owned(), cols[5..].join(" ")))
        })
        .collect()
}

#[test]
fn go_tool_pprof_reads_the_goroutine_and_cpu_profiles() {
    if !have_go() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    park_for_good("parked", 4, 2, parked);
    queue_for_good("queued", 2);
    let server = async_stack::http::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();

    let top = go_tool::pprof(
        dir.path(),
        &["-top", &format!("http://{addr}/debug/pprof/goroutine")],
    );
    let rows = top_rows(&top);
    assert!(
        rows.contains(&("4".to_owned(), "http_go_pprof::parked_leaf".to_owned())),
        "{top}"
    );
    assert!(
        rows.contains(&("2".to_owned(), "[not polled yet]".to_owned())),
        "{top}"
    );
    assert!(top.contains("Type: goroutine"), "{top}");
    // Labels: four tasks named `parked`, all idle, each a tokio task, and
    // two named `queued`, scheduled, in no tokio task before their first
    // poll.
    let tags = go_tool::pprof(
        dir.path(),
        &["-tags", &format!("http://{addr}/debug/pprof/goroutine")],
    );
    for label in [
        "task_name: Total 6.0",
        "4.0 (66.67%): parked",
        "2.0 (33.33%): queued",
        "state: Total 6.0",
        "4.0 (66.67%): idle",
        "2.0 (33.33%): scheduled",
        "tokio_task_id: Total 4.0",
    ] {
        assert!(tags.contains(label), "{label} in\n{tags}");
    }

    let top = go_tool::pprof(
        dir.path(),
        &[
            "-top",
            &format!("http://{addr}/debug/pprof/profile?seconds=2"),
        ],
    );
    let rows = top_rows(&top);
    assert!(
        rows.iter().any(|(_, f)| f == "http_go_pprof::parked_leaf"),
        "{top}"
    );
    assert!(top.contains("Type: samples"), "{top}");
}
