//! Helpers of the `http_*` tests: a real HTTP/1 client (hyper's) that
//! sends one request on a fresh connection and reads the whole answer,
//! a raw TCP client for requests no well-behaved client sends, and the
//! `go tool pprof` runner.
//!
//! Every test file that uses this module declares `mod http_common;`;
//! each uses a different subset of it, hence the `dead_code` allowance.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
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

/// Whether `go` runs: `false` (after saying so) when it is missing outside
/// CI; a panic when it is missing under CI.
pub fn have_go() -> bool {
    let found = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "`go` is not installed: run scripts/test.sh, which installs golang-go"
        );
        eprintln!("http tests: `go` is not installed, not running `go tool pprof`");
    }
    found
}

/// The standard output of `go tool pprof ARGS`, which must succeed, with
/// its caches in `dir` and no network but to the endpoint.
#[track_caller]
pub fn go_pprof(dir: &Path, args: &[&str]) -> String {
    let cache = dir.join("go");
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", cache.join("cache"))
        .env("GOPATH", cache.join("path"))
        .env("HOME", &cache)
        .env("PPROF_TMPDIR", &cache)
        .env_remove("PPROF_BINARY_PATH")
        .output()
        .expect("run go tool pprof");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "go tool pprof {args:?} failed: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stdout
}
