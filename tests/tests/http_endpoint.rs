//! The debug endpoint over HTTP, with a real client (hyper's): every route
//! answers with the exact content type and content, and every bad request
//! with its exact status and one-line reason.
//!
//! The tasks the routes show are three `http-waiter` tasks parked on a
//! channel, on a tokio runtime of the test's own; the endpoint runs on its
//! own thread, started once for the whole file.

mod common;
mod http_common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use async_stack::TaskDump;
use async_stack::traced_async;
use hyper::Method;

use common::wait_for;
use http_common::{entries, get, park_for_good, raw, request};

/// The `.await` line of `waiter_leaf`.
const LEAF_LINE: u32 = line!() + 3;
#[traced_async]
async fn waiter_leaf(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

/// The `.await` line of `waiter`.
const WAITER_LINE: u32 = line!() + 3;
#[traced_async]
async fn waiter(rx: tokio::sync::oneshot::Receiver<()>) {
    waiter_leaf(rx).await;
}

const FILE: &str = "tests/tests/http_endpoint.rs";

/// The endpoint, and three waiters that stay parked for the whole run.
fn endpoint() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        park_for_good("http-waiter", 3, 2, waiter);
        let server = async_stack::http::serve("127.0.0.1:0").expect("serve");
        let addr = server.local_addr();
        std::mem::forget(server);
        addr
    })
}

/// The text a waiter's frames print, innermost first.
fn waiter_frames() -> String {
    format!(
        "    http_endpoint::waiter_leaf [async]\n        awaiting at {FILE}:{LEAF_LINE}:16\n  \
         http_endpoint::waiter [async]\n      awaiting at {FILE}:{WAITER_LINE}:21\n"
    )
}

#[test]
fn index_lists_every_route_and_the_pprof_commands() {
    let addr = endpoint();
    for path in ["/debug/pprof/", "/debug/pprof"] {
        let reply = get(addr, path);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.content_type(), "text/html; charset=utf-8");
        let html = reply.text();
        for route in [
            "/debug/pprof/goroutine?debug=2",
            "/debug/pprof/goroutine?debug=1",
            "/debug/pprof/goroutine\"",
            "/debug/pprof/profile?seconds=30",
            "/debug/async/tasks.json",
            "/debug/async/folded?seconds=30",
            "/debug/async/wakes?seconds=10&amp;format=dot",
        ] {
            assert_eq!(
                html.lines()
                    .filter(|l| l.contains(&format!("<a href=\"{route}")))
                    .count(),
                1,
                "{route} in\n{html}"
            );
        }
        assert!(html.contains(&format!(
            "go tool pprof -top http://{addr}/debug/pprof/goroutine\n"
        )));
        assert!(html.contains(&format!(
            "go tool pprof -http=:8080 http://{addr}/debug/pprof/profile?seconds=30\n"
        )));
    }
}

#[test]
fn goroutine_debug_2_is_the_text_dump() {
    let reply = get(endpoint(), "/debug/pprof/goroutine?debug=2");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type(), "text/plain; charset=utf-8");
    assert_eq!(reply.headers["x-content-type-options"], "nosniff");
    let text = reply.text();
    // Spawned by a helper on tokio: each names its tokio task.
    let waiters = entries(text, " \"http-waiter\" (tokio task ");
    assert_eq!(waiters.len(), 3, "{text}");
    for entry in waiters {
        let body = entry.split_once(":\n").unwrap().1;
        assert!(body.starts_with(&waiter_frames()), "{entry}");
        assert!(
            body.contains("  spawned at tests/tests/http_common/mod.rs:"),
            "{entry}"
        );
    }
}

#[test]
fn goroutine_debug_1_coalesces_identical_stacks() {
    let reply = get(endpoint(), "/debug/pprof/goroutine?debug=1");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type(), "text/plain; charset=utf-8");
    let text = reply.text();
    let group = text
        .split("\n\n")
        .find(|e| e.contains(" \"http-waiter\""))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(group.starts_with("3 tasks [idle "), "{group}");
    assert_eq!(group.matches(" \"http-waiter\"").count(), 3, "{group}");
    let frames = group.split_once('\n').unwrap().1;
    assert!(frames.starts_with(&waiter_frames()), "{group}");
}

#[test]
fn goroutine_without_debug_is_a_gzipped_pprof_file() {
    for path in ["/debug/pprof/goroutine", "/debug/pprof/goroutine?debug=0"] {
        let reply = get(endpoint(), path);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.content_type(), "application/octet-stream");
        assert_eq!(
            reply.headers["content-disposition"],
            "attachment; filename=\"goroutine\""
        );
        assert_eq!(reply.body[..2], [0x1f, 0x8b], "gzip magic");
    }
}

#[test]
fn tasks_json_is_the_dump_json() {
    let reply = get(endpoint(), "/debug/async/tasks.json");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type(), "application/json");
    let dump = TaskDump::from_json(reply.text()).expect("the dump's JSON");
    let waiters: Vec<_> = dump
        .tasks
        .iter()
        .filter(|t| t.name.as_deref() == Some("http-waiter"))
        .collect();
    assert_eq!(waiters.len(), 3);
    for t in waiters {
        let frames: Vec<(&str, u32)> = t
            .frames
            .iter()
            .map(|f| (&*f.function, f.awaiting_at.as_ref().unwrap().line))
            .collect();
        assert_eq!(
            frames,
            [
                ("http_endpoint::waiter", WAITER_LINE),
                ("http_endpoint::waiter_leaf", LEAF_LINE)
            ]
        );
    }
}

#[test]
fn folded_and_profile_sample_for_the_seconds_asked() {
    let _sessions = sessions();
    let addr = endpoint();
    let reply = get(addr, "/debug/async/folded?seconds=1");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.content_type(), "text/plain; charset=utf-8");
    let stack = format!(
        "http-waiter;http_endpoint::waiter at {FILE}:{WAITER_LINE}:21;\
         http_endpoint::waiter_leaf at {FILE}:{LEAF_LINE}:16 "
    );
    assert!(
        reply.text().lines().any(|l| l.starts_with(&stack)),
        "{stack} in\n{}",
        reply.text()
    );

    let reply = get(addr, "/debug/pprof/profile?seconds=1");
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.content_type(), "application/octet-stream");
    assert_eq!(
        reply.headers["content-disposition"],
        "attachment; filename=\"profile\""
    );
    assert_eq!(reply.body[..2], [0x1f, 0x8b], "gzip magic");
}

#[test]
fn a_second_profile_while_one_runs_is_409() {
    let _sessions = sessions();
    let addr = endpoint();
    // Wakes: the recording is on exactly while a session runs.
    assert!(!async_stack::wake::is_recording());
    let first = hold(addr, "/debug/async/wakes?seconds=60&format=json");
    wait_for(
        "the first wake recording to start",
        async_stack::wake::is_recording,
    );
    let second = get(addr, "/debug/async/wakes?seconds=1");
    assert_eq!(second.status, 409);
    assert_eq!(
        second.text(),
        "409 Conflict: a wake recording is already running; try again when it ends\n"
    );
    // The client goes away: the session ends, and recording is restored
    // as it was (off) ...
    drop(first);
    wait_for("the wake recording to end with its client", || {
        !async_stack::wake::is_recording()
    });
    // ... and the next session runs to its end.
    let next = get(addr, "/debug/async/wakes?seconds=1&format=json");
    assert_eq!(next.status, 200);
    assert_eq!(next.content_type(), "application/json");
    let graph: serde_json::Value = serde_json::from_slice(&next.body).expect("JSON");
    assert!(graph["tasks"].is_array(), "{graph}");
    assert!(!async_stack::wake::is_recording());

    // ... and as it was when it was on.
    async_stack::wake::record(true);
    let dot = get(addr, "/debug/async/wakes?seconds=1&format=dot");
    assert_eq!(dot.status, 200);
    assert_eq!(dot.content_type(), "text/vnd.graphviz; charset=utf-8");
    assert!(dot.text().starts_with("digraph wakes {"), "{}", dot.text());
    assert!(async_stack::wake::is_recording());
    async_stack::wake::record(false);

    // The sampler: its thread exists exactly while a profile runs.
    let first = hold(addr, "/debug/pprof/profile?seconds=60");
    wait_for("the first profile to start", sampler_thread_runs);
    for path in [
        "/debug/pprof/profile?seconds=1",
        "/debug/async/folded?seconds=1",
    ] {
        let second = get(addr, path);
        assert_eq!(second.status, 409);
        assert_eq!(
            second.text(),
            "409 Conflict: a profile is already running; try again when it ends\n"
        );
    }
    drop(first);
    wait_for("the profile to end with its client", || {
        !sampler_thread_runs()
    });
}

/// A wake recording holds recording on while it runs and leaves the
/// program's own setting as the program last made it, whatever the
/// program does meanwhile. (The endpoint used to restore what it saw at
/// its start, which undid the program's `record(true)` made during the
/// request.)
#[test]
fn a_wake_recording_leaves_the_programs_own_setting() {
    let _sessions = sessions();
    let addr = endpoint();
    let wakes = "/debug/async/wakes?seconds=1";
    // Waits until a session of 1 s runs to its end: the held one is over.
    let until_free = || {
        while get(addr, wakes).status == 409 {
            std::thread::sleep(Duration::from_millis(20));
        }
    };

    // Off before; the program turns it on during the request.
    assert!(!async_stack::wake::is_recording());
    let held = hold(addr, "/debug/async/wakes?seconds=60");
    wait_for("the recording to start", async_stack::wake::is_recording);
    async_stack::wake::record(true);
    drop(held);
    until_free();
    assert!(
        async_stack::wake::is_recording(),
        "the program's record(true) was undone"
    );

    // On before; the program turns it off during the request, which runs
    // on to its end.
    let held = hold(addr, "/debug/async/wakes?seconds=60");
    while get(addr, wakes).status != 409 {
        std::thread::sleep(Duration::from_millis(20));
    }
    async_stack::wake::record(false);
    assert!(
        async_stack::wake::is_recording(),
        "the request's recording was cut short"
    );
    drop(held);
    until_free();
    assert!(
        !async_stack::wake::is_recording(),
        "the program's record(false) was undone"
    );
}

/// A profile request while the program runs its own on-CPU sampler (one
/// per process) is served wall-clock only, rather than failing with
/// `500`; the program's sampler is left running.
#[test]
fn a_profile_beside_the_programs_on_cpu_sampler_is_wall_clock() {
    let _sessions = sessions();
    let addr = endpoint();
    let ours = async_stack::sampler::Sampler::builder()
        .on_cpu(true)
        .start()
        .expect("the program's on-CPU sampler");
    let reply = get(addr, "/debug/async/folded?seconds=1");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.content_type(), "text/plain; charset=utf-8");
    // The program's sampler ran on throughout, and stops as usual.
    drop(ours.stop());
}

/// Sends `GET path` on a raw connection and returns the connection
/// unread: a timed route's session runs until its seconds are over or
/// the connection is dropped, whichever comes first. Holding a session
/// of 60 s, rather than waiting out a short one, makes "while one runs"
/// true however late the test's next request comes, and costs nothing:
/// the drop ends it.
///
/// Once the session's effects are seen to end (recording off, sampler
/// thread gone), its lock is free too: all of them are released in the
/// one poll of the server's one thread that drops the request, and that
/// thread reads the next request only after it.
fn hold(addr: SocketAddr, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
    stream
}

/// Serializes this file's tests that run a profile: the endpoint runs one
/// at a time per process, and a test's session would make another test's
/// `409`.
fn sessions() -> MutexGuard<'static, ()> {
    static SESSIONS: Mutex<()> = Mutex::new(());
    // A failed test poisons it; the next one still runs.
    SESSIONS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a thread named `async-stack-sam...` (the sampler) runs in this
/// process.
fn sampler_thread_runs() -> bool {
    std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
        std::fs::read_to_string(t.unwrap().path().join("comm"))
            .is_ok_and(|name| name.starts_with("async-stack-sam"))
    })
}

#[test]
fn bad_requests_get_their_status_and_a_one_line_reason() {
    let addr = endpoint();
    let cases: &[(Method, &str, u16, &str)] = &[
        (
            Method::GET,
            "/nope",
            404,
            "404 Not Found: no such route; the routes are listed at /debug/pprof/\n",
        ),
        (
            Method::POST,
            "/nope",
            404,
            "404 Not Found: no such route; the routes are listed at /debug/pprof/\n",
        ),
        (
            Method::POST,
            "/debug/pprof/goroutine",
            405,
            "405 Method Not Allowed: only GET is served\n",
        ),
        (
            Method::DELETE,
            "/debug/async/tasks.json",
            405,
            "405 Method Not Allowed: only GET is served\n",
        ),
        (
            Method::GET,
            "/debug/pprof/profile?seconds=abc",
            400,
            "400 Bad Request: seconds=abc is not a whole number of seconds (from 1 to 60)\n",
        ),
        (
            Method::GET,
            "/debug/pprof/profile?seconds=61",
            400,
            "400 Bad Request: seconds=61 is out of range: from 1 to 60\n",
        ),
        (
            Method::GET,
            "/debug/async/folded?seconds=0",
            400,
            "400 Bad Request: seconds=0 is out of range: from 1 to 60\n",
        ),
        (
            Method::GET,
            "/debug/async/wakes?seconds=-1",
            400,
            "400 Bad Request: seconds=-1 is not a whole number of seconds (from 1 to 60)\n",
        ),
        (
            Method::GET,
            "/debug/async/wakes?format=svg",
            400,
            "400 Bad Request: format=svg is not one of dot, json\n",
        ),
        (
            Method::GET,
            "/debug/pprof/goroutine?debug=3",
            400,
            "400 Bad Request: debug=3 is not 0, 1 or 2\n",
        ),
    ];
    for (method, path, status, text) in cases {
        let reply = request(addr, method.clone(), path, &[], "");
        assert_eq!(
            (reply.status, reply.text()),
            (*status, *text),
            "{method} {path}"
        );
        assert_eq!(reply.content_type(), "text/plain; charset=utf-8");
        if *status == 405 {
            assert_eq!(reply.headers["allow"], "GET");
        }
    }
    let reply = request(
        addr,
        Method::GET,
        "/debug/pprof/goroutine?debug=2",
        &[],
        "a body",
    );
    assert_eq!(reply.status, 413);
    assert_eq!(
        reply.text(),
        "413 Payload Too Large: request bodies are refused\n"
    );
}

#[test]
fn oversized_and_slow_requests_are_bounded() {
    let server = async_stack::http::Builder::new()
        .header_read_timeout(Duration::from_millis(200))
        .serve("127.0.0.1:0")
        .unwrap();
    let addr = server.local_addr();

    // 64 KiB of headers, over the 16 KiB limit.
    let mut big = b"GET /debug/pprof/ HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..1024 {
        big.extend_from_slice(format!("x-filler-{i:04}: {}\r\n", "y".repeat(48)).as_bytes());
    }
    big.extend_from_slice(b"\r\n");
    let answer = raw(addr, &big).expect("the server closes the connection");
    assert!(
        answer.starts_with(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    // Headers that never end: the connection is closed without an answer,
    // and meanwhile others are served.
    let slow = std::thread::spawn(move || raw(addr, b"GET /debug/pprof/ HTTP/1.1\r\nHost: x\r\n"));
    assert_eq!(get(addr, "/debug/pprof/").status, 200);
    let answer = slow
        .join()
        .unwrap()
        .expect("the server closes the connection");
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

#[test]
fn a_bearer_token_is_required_on_every_request() {
    let server = async_stack::http::Builder::new()
        .bearer_token("s3cret")
        .serve("127.0.0.1:0")
        .unwrap();
    let addr = server.local_addr();
    for path in ["/debug/pprof/", "/debug/pprof/goroutine?debug=2", "/nope"] {
        for auth in [
            None,
            Some("Bearer wrong!"),
            Some("Basic s3cret"),
            Some("Bearer s3cre"),
        ] {
            let headers: Vec<(&str, &str)> =
                auth.map(|a| ("authorization", a)).into_iter().collect();
            let reply = request(addr, Method::GET, path, &headers, "");
            assert_eq!(reply.status, 401, "{path} {auth:?}");
            assert_eq!(
                reply.text(),
                "401 Unauthorized: a bearer token is required\n"
            );
            assert_eq!(reply.headers["www-authenticate"], "Bearer");
        }
    }
    let ok = request(
        addr,
        Method::GET,
        "/debug/pprof/goroutine?debug=2",
        &[("authorization", "Bearer s3cret")],
        "",
    );
    assert_eq!(ok.status, 200);
    let ok = request(
        addr,
        Method::GET,
        "/debug/pprof/",
        &[("authorization", "bearer s3cret")],
        "",
    );
    assert_eq!(ok.status, 200);
    let not_found = request(
        addr,
        Method::GET,
        "/nope",
        &[("authorization", "Bearer s3cret")],
        "",
    );
    assert_eq!(not_found.status, 404);
}

#[test]
fn only_loopback_unless_allowed() {
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let err = async_stack::http::serve(addr).unwrap_err();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{addr}: {err}"
        );
    }
    let err = async_stack::http::serve("0.0.0.0:0").unwrap_err();
    assert_eq!(
        err.to_string(),
        "async-stack http: 0.0.0.0:0 is not a loopback address, and the endpoint reveals \
         the program's internals; Builder::allow_remote(true) serves on it"
    );
    let server = async_stack::http::Builder::new()
        .allow_remote(true)
        .serve("0.0.0.0:0")
        .expect("allowed");
    let port = server.local_addr().port();
    assert_ne!(port, 0);
    let reply = get(SocketAddr::from(([127, 0, 0, 1], port)), "/debug/pprof/");
    assert_eq!(reply.status, 200);
}

#[test]
fn dropping_the_server_stops_it() {
    let server = async_stack::http::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    assert_eq!(get(addr, "/debug/pprof/").status, 200);
    drop(server);
    // Joined: the port is closed.
    assert_eq!(
        std::net::TcpStream::connect(addr).unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
}
