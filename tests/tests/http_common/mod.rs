//! Helpers of the `http_*` tests: a real HTTP/1 client (hyper's) that
//! sends one request on a fresh connection and reads the whole answer,
//! a raw TCP client for requests no well-behaved client sends, and tasks
//! parked for the whole run for the routes to show.
//!
//! Every test file that uses this module declares `mod http_common;`;
//! each uses a different subset of it, hence the `dead_code` allowance.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;

/// An answer: status, headers, whole body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    /// The `Content-Type` header.
    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .map_or("", |v| v.to_str().unwrap())
    }

    /// The body as text.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }
}

/// `GET path` at `addr`.
pub fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, Method::GET, path, &[], "")
}

/// `method path` at `addr` with `headers` and `body`, on a connection
/// of its own, by hyper's client on a runtime of its own.
pub fn request(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &'static str,
) -> Reply {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(connection);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr.to_string());
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap();
        let res = sender.send_request(req).await.expect("an answer");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let body = res
            .into_body()
            .collect()
            .await
            .expect("a whole body")
            .to_bytes()
            .to_vec();
        Reply {
            status,
            headers,
            body,
        }
    })
}

/// Sends `bytes` on a raw connection, then reads until the server closes
/// it (or 60 s pass, which fails the caller's assertions with a
/// `TimedOut` error). Returns what was read.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(bytes)?;
    let mut out = Vec::new();
    match stream.read_to_end(&mut out) {
        Ok(_) => Ok(out),
        // A reset after an answer (the server closed with bytes unread).
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(out),
        Err(e) => Err(e),
    }
}

/// Spawns `n` tasks named `name`, made by `spawn`, on a runtime of their
/// own, and waits until each is parked `depth` frames deep. They stay
/// parked for the rest of the test process.
pub fn park_for_good<F>(
    name: &'static str,
    n: usize,
    depth: usize,
    spawn: impl Fn(tokio::sync::oneshot::Receiver<()>) -> F,
) where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut senders = Vec::new();
    for _ in 0..n {
        let (tx, rx) = tokio::sync::oneshot::channel();
        senders.push(tx);
        let _guard = rt.enter();
        drop(async_stack::tokio::spawn_named(name, spawn(rx)));
    }
    while async_stack::dump()
        .with_name_containing(name)
        .tasks
        .iter()
        // Parked: idle, not only `depth` frames deep (a task whose leaf
        // has just returned `Pending` is still in its poll, shown running,
        // for as long as its worker is preempted there).
        .filter(|t| t.frames.len() == depth && t.state == async_stack::TaskState::Idle)
        .count()
        < n
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::mem::forget((rt, senders));
}

/// Spawns `n` tasks named `name` through the helper on a runtime that
/// never runs them (a current-thread runtime runs tasks only inside its
/// `block_on`), and keeps them for the rest of the process: tasks shown
/// before their first poll.
pub fn queue_for_good(name: &'static str, n: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        for _ in 0..n {
            drop(async_stack::tokio::spawn_named(name, async {}));
        }
    });
    std::mem::forget(rt);
}

/// The entries of a text dump whose header contains `needle`.
pub fn entries<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.split("\n\n").filter(|e| e.contains(needle)).collect()
}

/// An axum service of `app` on a runtime of its own, and its address.
pub fn serve_axum(app: axum::Router) -> (tokio::runtime::Runtime, SocketAddr) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
    (rt, addr)
}

#[async_stack::traced_async]
async fn parked_leaf(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

/// A task two traced frames deep, parked at its leaf until `rx` fires
/// (or its sender is dropped).
#[async_stack::traced_async]
pub async fn parked_chain(rx: tokio::sync::oneshot::Receiver<()>) {
    parked_leaf(rx).await;
}
