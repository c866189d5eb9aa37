//! Clients that stop reading cannot keep the endpoint from others: a
//! connection whose client takes no bytes for `write_timeout` is closed,
//! which gives its place among `max_connections` back.
//!
//! Before the connection had a write deadline, a client that sent a
//! request and never read the answer kept its connection for as long as
//! it stayed connected (hyper waited in the socket's write, and the
//! streamed dump's own timeout was never seen), so `max_connections` such
//! clients shut everyone else out: every later connection was closed
//! without an answer.

mod http_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use async_stack::traced_async;

#[traced_async]
async fn parked(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

/// The status line of a `GET /debug/pprof/`, or `None` when the
/// connection is closed without an answer.
fn index_status(addr: SocketAddr) -> Option<String> {
    let reply = http_common::raw(
        addr,
        b"GET /debug/pprof/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .ok()?;
    let text = String::from_utf8_lossy(&reply);
    text.lines().next().map(str::to_owned)
}

#[test]
fn clients_that_stop_reading_give_their_connections_back() {
    // Enough tasks that each dump is megabytes, more than the sockets'
    // buffers hold.
    http_common::park_for_good("slow-client-task", 60_000, 1, parked);
    let server = async_stack::http::Builder::new()
        .max_connections(2)
        .write_timeout(Duration::from_millis(500))
        .serve("127.0.0.1:0")
        .unwrap();
    let addr = server.local_addr();
    assert_eq!(index_status(addr).as_deref(), Some("HTTP/1.1 200 OK"));

    // Two clients (the limit) ask for the two streamed dumps and never
    // read.
    let stalled: Vec<TcpStream> = ["/debug/pprof/goroutine?debug=2", "/debug/async/tasks.json"]
        .iter()
        .map(|path| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            s
        })
        .collect();

    // While they stay connected, the endpoint answers again once their
    // writes have waited the timeout. (No time is asserted: the loop
    // waits for the answer, and gives up only after a minute.)
    let start = Instant::now();
    let mut refused = 0;
    let status = loop {
        match index_status(addr) {
            Some(status) => break status,
            None if start.elapsed() < Duration::from_secs(60) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            None => panic!("no answer for a minute while two clients do not read"),
        }
    };
    assert_eq!(status, "HTTP/1.1 200 OK");
    eprintln!("answered again after {refused} refused connections");

    // The stalled connections were closed by the server: reading them now
    // drains what it had written, then ends.
    for mut s in stalled {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut buf = vec![0; 1 << 16];
        let mut total = 0usize;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("the stalled connection stays open: {e} after {total} bytes"),
            }
        }
        assert!(total > 0, "the stalled request got no answer at all");
    }
}
