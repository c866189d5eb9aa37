//! What `/debug/async/tasks.json` holds in memory while it streams does not
//! grow with the number of tasks: the peak of live heap bytes, all threads
//! counted, is within a fixed bound of its value for 500 tasks when there
//! are 20,000, where the JSON itself grows by megabytes.
//!
//! A test binary of its own, with one test, because it replaces the global
//! allocator with one that tracks the live bytes of the whole process.

mod http_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_stack::traced_async;

/// [`System`], tracking live bytes and their peak.
struct Tracking;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grow(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call goes to `System` unchanged; tracking touches only
// static atomics, which never allocate.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: the caller's obligations are `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with `layout` (every allocation
        // of this allocator does).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grow(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as for `dealloc`, and `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

#[traced_async]
async fn leaf(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[traced_async]
async fn root(rx: tokio::sync::oneshot::Receiver<()>) {
    leaf(rx).await;
}

/// Reads `tasks.json` from `addr` through a fixed buffer (the client
/// allocates nothing per byte), and returns (bytes read, peak live heap
/// bytes above the live bytes before the request).
fn stream_json(addr: SocketAddr) -> (usize, usize) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    stream
        .write_all(b"GET /debug/async/tasks.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 16 * 1024];
    let mut total = 0;
    loop {
        match stream.read(&mut buf).unwrap() {
            0 => break,
            n => total += n,
        }
    }
    (total, PEAK.load(Ordering::Relaxed).saturating_sub(base))
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
            drop(rt.spawn(root(rx)));
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
