//! The routes that build a whole dump in memory (`goroutine?debug=1`, the
//! goroutine profile) build one at a time: eight concurrent requests peak
//! at about the memory of one, where each of the endpoint's sixteen
//! blocking threads used to hold a dump of its own (64 concurrent
//! `debug=1` requests over 200,000 tasks took a process from 116 MB to
//! 2.3 GB).
//!
//! A test binary of its own, with one test, because it replaces the global
//! allocator with one that tracks the live bytes of the whole process.

mod http_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Sends `clients` concurrent requests for `path`; returns the peak of
/// live heap bytes above the live bytes before them, and each answer's
/// status line.
fn peak_of(addr: SocketAddr, path: &'static str, clients: usize) -> (usize, Vec<u16>) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let reply = http_common::get(addr, path);
                reply.status
            })
        })
        .collect();
    let statuses = threads.into_iter().map(|t| t.join().unwrap()).collect();
    (PEAK.load(Ordering::Relaxed).saturating_sub(base), statuses)
}

#[test]
fn concurrent_whole_dumps_take_the_memory_of_one() {
    http_common::park_for_good("whole-dump-task", 20_000, 2, root);
    let server = async_stack::http::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    for path in ["/debug/pprof/goroutine?debug=1", "/debug/pprof/goroutine"] {
        // Once to warm the caches (site tables, the blocking threads).
        let _ = peak_of(addr, path, 1);
        let (one, _) = peak_of(addr, path, 1);
        let (eight, statuses) = peak_of(addr, path, 8);
        eprintln!("{path}: peak +{one} B for one request, +{eight} B for eight at once");
        assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
        assert!(
            one > 1_000_000,
            "{path}: one dump of 20,000 tasks takes {one} B"
        );
        assert!(
            eight < 2 * one,
            "{path}: eight concurrent requests peak at {eight} B, one at {one} B"
        );
    }
}
