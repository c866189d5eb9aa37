//! What `/debug/async/tasks.json` holds in memory while it streams does not
//! grow with the number of tasks: the peak of live heap bytes, all threads
//! counted, is within a fixed bound of its value for 500 tasks when there
//! are 20,000, where the JSON itself grows by megabytes.
//!
//! A test binary of its own, with one test, because it replaces the global
//! allocator with one that tracks the live bytes of the whole process.

mod http_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

mod live_bytes;

#[global_allocator]
static GLOBAL: live_bytes::Tracking = live_bytes::Tracking;

/// Reads `tasks.json` from `addr` through a fixed buffer (the client
/// allocates nothing per byte), and returns (bytes read, peak live heap
/// bytes above the live bytes before the request).
fn stream_json(addr: SocketAddr) -> (usize, usize) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    live_bytes::peak_during(|| {
        stream
            .write_all(
                b"GET /debug/async/tasks.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .unwrap();
        let mut buf = [0u8; 16 * 1024];
        let mut total = 0;
        loop {
            match stream.read(&mut buf).unwrap() {
                0 => break,
                n => total += n,
            }
        }
        total
    })
}

#[test]
fn tasks_json_memory_does_not_grow_with_tasks() {
    let server = async_stack::http::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut senders = Vec::new();
    let mut spawn = |n: usize| {
        for _ in 0..n {
            let (tx, rx) = tokio::sync::oneshot::channel();
            senders.push(tx);
            drop(rt.spawn(http_common::parked_chain(rx)));
        }
        // Polls every new task once (the run queue is first in, first
        // out, and this task comes last): each parks at its leaf.
        rt.block_on(rt.spawn(async {})).unwrap();
    };
    spawn(500);
    // Once to warm the server's caches (site tables, connection buffers).
    stream_json(addr);
    let (small_bytes, small_peak) = stream_json(addr);
    spawn(19_500);
    let (big_bytes, big_peak) = stream_json(addr);

    eprintln!(
        "tasks.json: {small_bytes} bytes, peak +{small_peak} B; {big_bytes} bytes, peak +{big_peak} B"
    );
    assert!(
        big_bytes > small_bytes + 4_000_000,
        "{small_bytes} -> {big_bytes} bytes"
    );
    // The channel holds 4 chunks of 32 KB and the writer one; the rest is
    // one task and the renderer's caches.
    assert!(
        big_peak < small_peak + 256 * 1024,
        "peak live bytes {small_peak} for 500 tasks, {big_peak} for 20,000 ({big_bytes} bytes of JSON)"
    );
    drop(senders);
}
