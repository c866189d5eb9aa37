//! `http`: `GET /debug/pprof/goroutine?debug=2` of 10,000 live, suspended
//! tasks, 9 frames deep, served by the debug endpoint over loopback.
//!
//! # What runs
//!
//! The population of the `dump` bench ([`benches::dump_population`]):
//! 10,000 tasks, each a chain of 9 instrumented async fns parked forever.
//! The endpoint (`async_stack::http::serve("127.0.0.1:0")`) runs on its own
//! thread; each iteration opens a connection, sends an HTTP/1.0 request and
//! reads the whole answer (about 11 MB of text) into a buffer reused
//! across iterations. The first answer is checked outside the timing:
//! `200 OK`, `text/plain`, and 10,000 task headers.
//!
//! Variants, one criterion group, timed on the **wall clock** (the work is
//! on the endpoint's threads, not the bench thread):
//!
//! - `write_text(sink)`: the baseline, `async_stack::dump::write_text`
//!   into `io::sink()` on the bench thread: the dump alone;
//! - `GET goroutine?debug=2`: the same text served over HTTP. Its target
//!   is 50 ms (measured: 4.0 ms, 2.1 times the baseline's 1.9 ms, on a
//!   shared 2-core machine); the ratio to the baseline is the cost of serving (the
//!   channel between the writer and the connection, hyper, the socket).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use benches::dump_population;
use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};

/// The whole answer to `GET path`, in `out`.
fn get(addr: SocketAddr, out: &mut Vec<u8>) {
    out.clear();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET /debug/pprof/goroutine?debug=2 HTTP/1.0\r\nHost: bench\r\n\r\n")
        .unwrap();
    stream.read_to_end(out).unwrap();
}

fn http(c: &mut Criterion) {
    let mut group = c.benchmark_group("http");
    group.sampling_mode(SamplingMode::Flat).sample_size(20);

    let rt = dump_population::populate_async_stack();
    let server = async_stack::http::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    let mut answer = Vec::with_capacity(8 << 20);
    get(addr, &mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.0 200 OK\r\n"), "{}", &text[..200]);
    assert!(text.contains("content-type: text/plain; charset=utf-8\r\n"));
    assert_eq!(text.matches(" polls]:\n").count(), benches::DUMP_TASKS,);
    eprintln!("goroutine?debug=2: {} bytes", answer.len());

    group.bench_function("write_text(sink)", |b| {
        b.iter(|| async_stack::dump::write_text(std::io::sink()).map(|s| s.tasks));
    });
    group.bench_function("GET goroutine?debug=2", |b| {
        b.iter(|| get(addr, &mut answer));
    });
    group.finish();
    drop(server);
    drop(rt);
}

criterion_group!(benches, http);
criterion_main!(benches);
