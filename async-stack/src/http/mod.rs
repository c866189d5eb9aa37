//! The debug HTTP endpoint (feature `http`): task dumps, profiles and the
//! wake graph over HTTP, at the paths Go's `net/http/pprof` uses, so that
//! `go tool pprof` and existing habits work.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! let server = async_stack::http::serve("127.0.0.1:6060")?;
//! println!("curl http://{}/debug/pprof/goroutine?debug=2", server.local_addr());
//! // ... the program runs; dropping `server` stops the endpoint.
//! # Ok(())
//! # }
//! ```
//!
//! # Its own thread
//!
//! [`serve`] binds the address on the calling thread (so that its errors
//! come back at once), then serves on a thread of its own,
//! `async-stack-http`, with its own single-threaded tokio runtime and
//! hyper's HTTP/1 server. It never touches the application's runtime: it
//! answers while every worker of that runtime is blocked inside a poll,
//! since reading stacks never waits for a task (see [`dump`](mod@crate::dump)).
//! Idle, the thread sleeps in the kernel waiting for connections: no
//! timer ticks, no CPU. Dropping the [`DebugServer`] stops it and joins
//! the thread.
//!
//! # Routes
//!
//! | path | serves |
//! |---|---|
//! | `/debug/pprof/` | an HTML index: every link, and the `go tool pprof` commands |
//! | `/debug/pprof/goroutine?debug=2` | the text dump, streamed ([`write_text`](crate::dump::write_text)) |
//! | `/debug/pprof/goroutine?debug=1` | the coalesced text dump (`{:#}`) |
//! | `/debug/pprof/goroutine` | a gzipped pprof profile, one sample per task |
//! | `/debug/pprof/profile?seconds=N` | a sampler profile of N seconds, as [`Profile::write_pprof`](crate::sampler::Profile::write_pprof) writes it |
//! | `/debug/async/tasks.json` | the dump's JSON, streamed ([`write_json`](crate::dump::write_json)) |
//! | `/debug/async/folded?seconds=N` | a sampler profile of N seconds as folded stacks |
//! | `/debug/async/wakes?seconds=N&format=dot\|json` | the wake graph, recorded for N seconds |
//! | `/debug/async/deadlocks` | the deadlocks among the live tasks ([`deadlocks()`](crate::waits::report::deadlocks)), as text: one paragraph per wait, `no deadlock` when there is none |
//!
//! `seconds` is 30 by default (or the maximum, if lower) and at most
//! [`Builder::max_seconds`] (60 by default). The goroutine profile has one
//! sample per live task, of value 1: its stack is the path from the task's
//! root to its first pending branch (the text dump shows every branch),
//! with the labels `task_id`, `task_name` (when named) and `state`, the
//! keys of the sampler's profiles.
//!
//! # Bad requests
//!
//! Every answer is decided without a panic, and no request holds another
//! back beyond a timeout:
//!
//! - an unknown path is `404 Not Found`; another method than `GET` on a
//!   known path is `405 Method Not Allowed`; a request with a body is
//!   `413 Payload Too Large`;
//! - a `seconds`, `debug` or `format` that does not parse or is out of
//!   range is `400 Bad Request`, with a one-line reason;
//! - a second sampler profile (`profile`, `folded`) while one runs, or a
//!   second wake recording while one runs, is `409 Conflict`;
//! - headers must arrive within [`Builder::header_read_timeout`] and fit
//!   in [`Builder::max_header_bytes`] (else the connection is closed, or
//!   answered `431`); at most [`Builder::max_connections`] connections are
//!   served at once (others are closed at once); a connection whose
//!   client stops reading (a streamed dump, or any answer) is closed once
//!   a write has waited [`Builder::write_timeout`] for it, which frees its
//!   place;
//! - the routes that build a whole dump in memory (`goroutine?debug=1`,
//!   the goroutine profile, `deadlocks`) build one at a time: concurrent
//!   requests wait their turn, so memory does not grow with the number of
//!   clients.
//!
//! # Security
//!
//! Every route reveals the program's internals: function names, source
//! paths and lines, task names (which may carry data, such as a user id,
//! if the program puts it there), states and timings; profiles reveal
//! native frames and binary paths. A profile or wake recording also costs
//! the program some CPU for its duration. Hence:
//!
//! - [`serve`] refuses an address that is not loopback, with
//!   [`io::ErrorKind::PermissionDenied`](std::io::ErrorKind::PermissionDenied);
//!   [`Builder::allow_remote`] allows one;
//! - [`Builder::bearer_token`] requires `Authorization: Bearer <token>` on
//!   every request (`401 Unauthorized` otherwise). There is no TLS: put a
//!   proxy in front of an endpoint reached over a network.
//!
//! A profile (`profile`, `folded`) samples on-CPU too, on Linux, and a
//! process runs one on-CPU sampler at a time: if the program runs its own
//! (`Sampler::builder().on_cpu(true)`), the endpoint's profiles are
//! wall-clock only; while an endpoint profile runs, the program's own
//! on-CPU `start` fails with `AlreadyExists` (retry after the request's
//! `seconds`, or serve the endpoint's profiles from the program's
//! sampler instead).
//!
//! # In an axum service (feature `axum`)
//!
//! [`router()`] gives the same routes as an axum `Router`, to merge into
//! a service's own. Its handlers then run on the service's runtime (the
//! dumps still never wait for a task, but a runtime whose workers are all
//! blocked cannot answer); the connection limits are the service's.
//!
//! # Files
//!
//! - `server.rs`: [`Builder`], [`serve`] and [`DebugServer`]: the thread,
//!   its runtime, the accept loop and the connection limits;
//! - `routes.rs`: which route answers a request, and the bad requests;
//! - `query.rs`: the query parameters, parsed and checked;
//! - `body.rs`: response bodies, whole or streamed from a blocking writer
//!   through a bounded channel;
//! - `deadline.rs`: the connection's write deadline;
//! - `index.rs`: the HTML index;
//! - `goroutine.rs`: the goroutine profile (pprof, one sample per task);
//! - `session.rs`: the timed routes (sampler profiles, wake recording),
//!   one at a time each;
//! - `router.rs` (feature `axum`): [`router()`].
//!
#![cfg_attr(feature = "axum", doc = "[`router()`]: fn@router")]
#![cfg_attr(
    not(feature = "axum"),
    doc = "[`router()`]: #in-an-axum-service-feature-axum"
)]
// (`router()` exists only with the `axum` feature: without it, the links
// lead to the section that names it.)

mod body;
mod deadline;
mod goroutine;
mod index;
mod query;
#[cfg(feature = "axum")]
mod router;
mod routes;
mod server;
mod session;

#[cfg(feature = "axum")]
pub use router::router;
pub use server::{Builder, DebugServer, serve};
