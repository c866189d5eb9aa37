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

use std::net::SocketAddr;

mod live_bytes;

#[global_allocator]
static GLOBAL: live_bytes::Tracking = live_bytes::Tracking;

/// Sends `clients` concurrent requests for `path`; returns the peak of
/// live heap bytes above the live bytes before them, and each answer's
/// status.
fn peak_of(addr: SocketAddr, path: &'static str, clients: usize) -> (usize, Vec<u16>) {
    let (statuses, peak) = live_bytes::peak_during(|| {
        let threads: Vec<_> = (0..clients)
            .map(|_| std::thread::spawn(move || http_common::get(addr, path).status))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    (peak, statuses)
}

#[test]
fn concurrent_whole_dumps_take_the_memory_of_one() {
    http_common::park_for_good("whole-dump-task", 20_000, 2, http_common::parked_chain);
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
