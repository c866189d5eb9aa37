//! The endpoint's server: [`Builder`] and its options, [`serve`], and the
//! [`DebugServer`] handle whose drop stops it.
//!
//! # Lifecycle
//!
//! [`Builder::serve`] resolves and checks the address (loopback unless
//! [`Builder::allow_remote`]), binds it and builds a single-threaded tokio
//! runtime, all on the calling thread, so every error is returned there.
//! It then moves the listener and the runtime to a new thread,
//! `async-stack-http`, which accepts connections until the handle is
//! dropped. Each connection is a task of that runtime, served by hyper's
//! HTTP/1 server; work that takes more than a few microseconds (reading
//! every task, encoding a profile) runs on the runtime's blocking threads,
//! so a long dump never holds back another request's headers.
//!
//! Dropping the [`DebugServer`] tells the accept loop to stop, then joins
//! the thread, which drops the runtime: connections still open are closed,
//! a profile in progress is stopped (see `session.rs`), and the blocking
//! threads are given a second to finish (a streamed dump ends at its next
//! write, its receiver gone).

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{Semaphore, oneshot};

use super::deadline::WriteDeadline;
use super::routes::{Config, respond};

/// The default of [`Builder::max_seconds`].
const DEFAULT_MAX_SECONDS: u64 = 60;
/// The smallest header buffer hyper accepts.
const MIN_HEADER_BYTES: usize = 8192;

/// Options of the debug endpoint; [`serve`] uses the defaults.
///
/// ```no_run
/// use std::time::Duration;
///
/// # fn main() -> std::io::Result<()> {
/// let server = async_stack::http::Builder::new()
///     .allow_remote(true)
///     .bearer_token("s3cret")
///     .max_seconds(120)
///     .header_read_timeout(Duration::from_secs(2))
///     .serve("0.0.0.0:6060")?;
/// println!("debug endpoint on {}", server.local_addr());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Builder {
    allow_remote: bool,
    bearer_token: Option<String>,
    max_seconds: u64,
    header_read_timeout: Duration,
    write_timeout: Duration,
    max_header_bytes: usize,
    max_connections: usize,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token stays out of logs.
        f.debug_struct("Builder")
            .field("allow_remote", &self.allow_remote)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<set>"))
            .field("max_seconds", &self.max_seconds)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("max_header_bytes", &self.max_header_bytes)
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            allow_remote: false,
            bearer_token: None,
            max_seconds: DEFAULT_MAX_SECONDS,
            header_read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            max_header_bytes: 16 * 1024,
            max_connections: 64,
        }
    }
}

impl Builder {
    /// The defaults: loopback only, no token, `seconds` up to 60, headers
    /// within 10 s and 16 KiB, streamed writes within 30 s, 64
    /// connections.
    pub fn new() -> Self {
        Self::default()
    }

    /// Allows an address that is not loopback (`0.0.0.0`, a public
    /// interface). Off by default: the endpoint reveals the program's
    /// internals (see the [module docs](super#security)); pair it with
    /// [`Builder::bearer_token`].
    pub fn allow_remote(mut self, allow: bool) -> Self {
        self.allow_remote = allow;
        self
    }

    /// Requires `Authorization: Bearer <token>` on every request; others
    /// are answered `401 Unauthorized`. The comparison takes the same time
    /// wherever the first difference is.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// The largest `seconds` a timed route accepts (60 by default; at
    /// least 1); a larger one is answered `400 Bad Request`.
    pub fn max_seconds(mut self, seconds: u64) -> Self {
        self.max_seconds = seconds.max(1);
        self
    }

    /// How long a client may take to send a request's headers, from the
    /// first read of the request (10 s by default). A connection that
    /// takes longer is closed.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// How long a response waits for the client to take more of it (30 s
    /// by default) before the connection is closed: a write to the
    /// connection that waits that long fails, and so does a streamed
    /// dump's (`goroutine?debug=2`, `tasks.json`) wait to hand over its
    /// next chunk. A client that stops reading thus gives back its place
    /// among [`Builder::max_connections`].
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// The largest request head (request line and headers) read, in bytes
    /// (16 KiB by default; at least 8 KiB, hyper's minimum). A larger one
    /// is answered `431 Request Header Fields Too Large`.
    pub fn max_header_bytes(mut self, bytes: usize) -> Self {
        self.max_header_bytes = bytes.max(MIN_HEADER_BYTES);
        self
    }

    /// How many connections are served at once (64 by default; at least
    /// 1). A connection beyond that is closed as soon as it is accepted.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// What the routes need of the options.
    pub(super) fn config(&self) -> Config {
        Config {
            bearer_token: self.bearer_token.clone(),
            max_seconds: self.max_seconds,
            write_timeout: self.write_timeout,
        }
    }

    /// Binds `addr` and serves the endpoint on a thread of its own until
    /// the returned [`DebugServer`] is dropped.
    ///
    /// # Errors
    ///
    /// - [`io::ErrorKind::PermissionDenied`] when `addr` resolves to an
    ///   address that is not loopback and [`Builder::allow_remote`] was
    ///   not set;
    /// - [`io::ErrorKind::InvalidInput`] when it resolves to no address;
    /// - the errors of resolving and binding `addr`, of building the
    ///   runtime and of spawning the thread.
    pub fn serve(self, addr: impl ToSocketAddrs) -> io::Result<DebugServer> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "async-stack http: the address resolves to no address",
            ));
        }
        if !self.allow_remote
            && let Some(remote) = addrs.iter().find(|a| !a.ip().is_loopback())
        {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "async-stack http: {remote} is not a loopback address, and the endpoint \
                     reveals the program's internals; Builder::allow_remote(true) serves on it"
                ),
            ));
        }
        let listener = std::net::TcpListener::bind(&addrs[..])?;
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .thread_name("async-stack-http-blocking")
            .max_blocking_threads(16)
            .build()?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("async-stack-http".into())
            .spawn(move || {
                runtime.block_on(accept_loop(listener, self, stopped));
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        Ok(DebugServer {
            local_addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// Serves the endpoint at `addr` with the default options (see
/// [`Builder`]): `127.0.0.1:0` picks a free port, which
/// [`DebugServer::local_addr`] tells.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let server = async_stack::http::serve("127.0.0.1:0")?;
/// let addr = server.local_addr();
/// println!("go tool pprof -top http://{addr}/debug/pprof/goroutine");
/// drop(server); // stops the endpoint, and joins its thread
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// As [`Builder::serve`]: [`io::ErrorKind::PermissionDenied`] for an
/// address that is not loopback.
pub fn serve(addr: impl ToSocketAddrs) -> io::Result<DebugServer> {
    Builder::new().serve(addr)
}

/// A running debug endpoint; dropping it stops the endpoint and joins its
/// thread.
#[derive(Debug)]
pub struct DebugServer {
    local_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl DebugServer {
    /// The address served (with the port picked, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for DebugServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections until `stopped` fires, each served by a task of
/// its own while a permit of the connection limit is free.
async fn accept_loop(
    listener: std::net::TcpListener,
    builder: Builder,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            crate::warn::warn(format_args!("async-stack http: cannot serve: {e}"));
            return;
        }
    };
    let config = Arc::new(builder.config());
    let permits = Arc::new(Semaphore::new(builder.max_connections));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(builder.header_read_timeout)
        .max_buf_size(builder.max_header_bytes);
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors, or a connection reset before
                // it was accepted: wait a little rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            continue; // over the limit: `stream` is dropped, closing it
        };
        let config = config.clone();
        let connection = http.serve_connection(
            TokioIo::new(WriteDeadline::new(stream, builder.write_timeout)),
            service_fn(move |req| {
                let config = config.clone();
                async move { Ok::<_, std::convert::Infallible>(respond(&config, req).await) }
            }),
        );
        tokio::spawn(async move {
            // A client that goes away mid-request is no error of ours.
            let _ = connection.await;
            drop(permit);
        });
    }
}
