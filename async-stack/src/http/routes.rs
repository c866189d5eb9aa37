//! Which route answers a request, and the answers to bad ones.
//!
//! A request is checked in this order, and the first check that fails
//! gives the answer: the bearer token (`401`), the path (`404`), the
//! method (`405`), the absence of a body (`413`), then the route's query
//! parameters (`400`, with a one-line reason), then whether a timed
//! route's lock is free (`409`). Errors have a `text/plain` body of one
//! line; every answer carries `X-Content-Type-Options: nosniff`, so that
//! a browser never runs a dump as a page.
//!
//! Reading the tasks and encoding a profile run on blocking threads of the
//! runtime that serves the request, never on its event loop; the routes
//! that read every task into memory at once take turns ([`WHOLE`]).

use std::time::Duration;

use bytes::Bytes;
use hyper::body::Body as HttpBody;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::body::{Body, full, streamed};
use super::query::Query;
use super::session::{SAMPLER, WAKES, record_wakes, sample};
use super::{goroutine, index};
use crate::read::dump::{dump, write_json, write_text};
use crate::waits::report::deadlocks;

/// What the routes need of the [`Builder`](super::Builder)'s options.
#[derive(Clone, Debug)]
pub(super) struct Config {
    pub(super) bearer_token: Option<String>,
    pub(super) max_seconds: u64,
    pub(super) write_timeout: Duration,
}

/// The routes, by path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    Index,
    Goroutine,
    Profile,
    TasksJson,
    Folded,
    Wakes,
    Deadlocks,
}

impl Route {
    /// Every route and its path (the index's second spelling aside).
    pub(super) const ALL: [(Route, &'static str); 7] = [
        (Route::Index, "/debug/pprof/"),
        (Route::Goroutine, "/debug/pprof/goroutine"),
        (Route::Profile, "/debug/pprof/profile"),
        (Route::TasksJson, "/debug/async/tasks.json"),
        (Route::Folded, "/debug/async/folded"),
        (Route::Wakes, "/debug/async/wakes"),
        (Route::Deadlocks, "/debug/async/deadlocks"),
    ];

    /// The route at `path`, if any.
    pub(super) fn of(path: &str) -> Option<Route> {
        if path == "/debug/pprof" {
            return Some(Route::Index);
        }
        Route::ALL.iter().find(|(_, p)| *p == path).map(|&(r, _)| r)
    }
}

const TEXT: &str = "text/plain; charset=utf-8";
const PPROF: &str = "application/octet-stream";
const JSON: &str = "application/json";

/// The answer to `req`.
pub(super) async fn respond<B: HttpBody>(config: &Config, req: Request<B>) -> Response<Body> {
    if let Some(token) = &config.bearer_token
        && !authorized(req.headers(), token)
    {
        let mut res = error(StatusCode::UNAUTHORIZED, "a bearer token is required");
        res.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return res;
    }
    let Some(route) = Route::of(req.uri().path()) else {
        return error(
            StatusCode::NOT_FOUND,
            "no such route; the routes are listed at /debug/pprof/",
        );
    };
    if req.method() != Method::GET {
        let mut res = error(StatusCode::METHOD_NOT_ALLOWED, "only GET is served");
        res.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return res;
    }
    if !req.body().is_end_stream() {
        let mut res = error(StatusCode::PAYLOAD_TOO_LARGE, "request bodies are refused");
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return res;
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let query = Query::parse(req.uri().query());
    match answer(config, route, &query, host).await {
        Ok(res) => res,
        Err((status, reason)) => error(status, &reason),
    }
}

/// The answer of `route`, or an error status and its reason.
async fn answer(
    config: &Config,
    route: Route,
    query: &Query<'_>,
    host: Option<&str>,
) -> Result<Response<Body>, (StatusCode, String)> {
    let bad = |reason| (StatusCode::BAD_REQUEST, reason);
    let conflict = |reason| (StatusCode::CONFLICT, reason);
    Ok(match route {
        Route::Index => ok("text/html; charset=utf-8", full(index::page(host))),
        Route::Goroutine => match query.debug().map_err(bad)? {
            2 => ok(
                TEXT,
                streamed(config.write_timeout, |out| write_text(out).map(drop)),
            ),
            1 => ok(TEXT, full(whole(|| Ok(dump().to_text(true))).await?)),
            _ => attachment("goroutine", whole(goroutine::profile).await?),
        },
        Route::TasksJson => ok(
            JSON,
            streamed(config.write_timeout, |out| write_json(out).map(drop)),
        ),
        Route::Profile | Route::Folded => {
            let seconds = query.seconds(config.max_seconds).map_err(bad)?;
            let lock = SAMPLER.take().map_err(conflict)?;
            let profile = sample(lock, seconds).await.map_err(internal)?;
            if route == Route::Profile {
                let bytes = blocking(move || {
                    let mut out = Vec::new();
                    profile.write_pprof(&mut out).map(|()| out)
                });
                attachment("profile", bytes.await?)
            } else {
                let bytes = blocking(move || {
                    let mut out = Vec::new();
                    profile.write_folded(&mut out).map(|()| out)
                });
                ok(TEXT, full(bytes.await?))
            }
        }
        Route::Deadlocks => ok(TEXT, full(whole(|| Ok(deadlocks_text())).await?)),
        Route::Wakes => {
            let format = query.format(&["dot", "json"]).map_err(bad)?;
            let seconds = query.seconds(config.max_seconds).map_err(bad)?;
            let lock = WAKES.take().map_err(conflict)?;
            let graph = record_wakes(lock, seconds).await.map_err(internal)?;
            if format == "dot" {
                ok("text/vnd.graphviz; charset=utf-8", full(graph.to_dot()))
            } else {
                ok(JSON, full(graph.to_json()))
            }
        }
    })
}

/// The deadlocks among the live tasks, each reported once, one paragraph
/// per wait and an empty line between deadlocks; one line when there is
/// none.
fn deadlocks_text() -> String {
    let found = deadlocks();
    if found.is_empty() {
        return "no deadlock\n".to_owned();
    }
    let mut text = String::new();
    for d in found {
        text.push_str(&format!("{d}\n\n"));
    }
    text
}

/// The routes that read every task into memory at once, one at a time
/// (in the order they asked), whichever server or router serves them: a
/// whole dump of a million tasks takes hundreds of megabytes, and sixteen
/// at once (one per blocking thread) could take a service's memory. The
/// streamed routes need no turn: they hold one task at a time.
static WHOLE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// Runs `work`, which reads every task into memory, on a blocking thread,
/// when no other such work runs (see [`WHOLE`]).
async fn whole<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, (StatusCode, String)> {
    // Never closed, so `acquire` cannot fail.
    let turn = WHOLE.acquire().await.map_err(|e| internal(e.to_string()))?;
    // The turn ends with the work, not with the request: a client that
    // goes away does not let the next dump start beside its own.
    blocking(move || {
        let out = work();
        drop(turn);
        out
    })
    .await
}

/// Runs `work` on a blocking thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, (StatusCode, String)> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(internal(e.to_string())),
        Err(e) => Err(internal(e.to_string())),
    }
}

fn internal(reason: String) -> (StatusCode, String) {
    (StatusCode::INTERNAL_SERVER_ERROR, reason)
}

/// Whether `headers` carry `Authorization: Bearer <token>`. The token is
/// compared in time that depends on its length only.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let Some((scheme, given)) = value.split_at_checked(7) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case(b"Bearer ") || given.len() != token.len() {
        return false;
    }
    given
        .iter()
        .zip(token.as_bytes())
        .fold(0u8, |diff, (a, b)| diff | (a ^ b))
        == 0
}

/// A `200 OK` of `content_type`.
fn ok(content_type: &'static str, body: Body) -> Response<Body> {
    response(StatusCode::OK, content_type, body)
}

/// A `200 OK` pprof file, named `name` when saved.
fn attachment(name: &'static str, bytes: Vec<u8>) -> Response<Body> {
    let mut res = ok(PPROF, full(bytes));
    let disposition = match name {
        "profile" => "attachment; filename=\"profile\"",
        _ => "attachment; filename=\"goroutine\"",
    };
    res.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static(disposition),
    );
    res
}

/// An error: `status`, and `reason` as one line of text.
fn error(status: StatusCode, reason: &str) -> Response<Body> {
    let line = format!(
        "{} {}: {reason}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    response(status, TEXT, full(Bytes::from(line)))
}

fn response(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut res = Response::new(body);
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}
