//! `#[traced_async]` with another attribute macro on the same fn, here
//! tracing's `#[instrument]`, in both orders: frames are named after the
//! function, as without the other attribute, in a backtrace and in a dump.
//!
//! Below `#[traced_async]`, `#[instrument]` expands second and moves the
//! whole body, call-site record included, into an `async move` block of its
//! own: the record then sits in `Handler::run::{{closure}}::{{closure}}`,
//! and the frame must still be `Handler::run`. Above it, `#[instrument]`
//! expands first and hands `#[traced_async]` a body that is one `async move`
//! block awaited: the frame is named as usual, but each `.await` of the body
//! is inside that block, so the frame is shown suspended at the `.await`
//! that `#[instrument]` wrote, which is spanned at `#[instrument]`.
//!
//! `run`'s `id` is used only by `#[instrument]`'s span: with `#[traced_async]`
//! above, it must not be reported as unused either.

#![deny(unused_variables)]

mod common;

use async_stack::{Backtrace, traced_async};
use tokio::sync::oneshot;

use common::{async_frames, awaiting, running};

#[derive(Debug)]
pub struct Handler;

impl Handler {
    /// Captures a backtrace, then waits for `rx`.
    #[traced_async]
    #[tracing::instrument(skip(self, rx))]
    async fn run(&self, id: u32, rx: oneshot::Receiver<()>) -> (Backtrace, u32) {
        let (bt, line) = (async_stack::backtrace(), line!());
        let _ = rx.await;
        (bt, line)
    }

    #[traced_async]
    #[tracing::instrument(skip_all)]
    async fn route(&self, rx: oneshot::Receiver<()>) -> (Backtrace, u32, u32) {
        let ((bt, run_line), line) = (self.run(7, rx).await, line!());
        (bt, run_line, line)
    }

    /// The other order: `#[instrument]` above.
    #[tracing::instrument(skip_all)]
    #[traced_async]
    async fn serve(&self, rx: oneshot::Receiver<()>) -> (Backtrace, u32, u32) {
        let ((bt, run_line), line) = (self.run(8, rx).await, line!());
        (bt, run_line, line)
    }
}

/// The line of `serve`'s `#[instrument]`, where the `.await` it wraps
/// around the body is.
const SERVE_INSTRUMENT_LINE: u32 = 47;

#[test]
fn frames_below_instrument_are_named_after_the_function() {
    let (tx, rx) = oneshot::channel();
    tx.send(()).unwrap();
    let ((bt, run_line, route_line), _) = common::block_on(Handler.route(rx));
    assert_eq!(
        async_frames(&bt),
        [
            running("macro_instrument::Handler::run", file!(), run_line),
            awaiting("macro_instrument::Handler::route", file!(), route_line),
        ],
        "{bt}"
    );
}

#[test]
fn frames_above_instrument_are_named_after_the_function() {
    let (tx, rx) = oneshot::channel();
    tx.send(()).unwrap();
    let ((bt, run_line, _), _) = common::block_on(Handler.serve(rx));
    assert_eq!(
        async_frames(&bt),
        [
            running("macro_instrument::Handler::run", file!(), run_line),
            awaiting(
                "macro_instrument::Handler::serve",
                file!(),
                SERVE_INSTRUMENT_LINE
            ),
        ],
        "{bt}"
    );
}

#[tokio::test]
async fn a_dump_of_an_instrumented_server_names_each_handler() {
    let (tx, rx) = oneshot::channel();
    let task = async_stack::tokio::spawn_named("instrumented-handler", async move {
        Handler.route(rx).await;
    });
    tokio::task::yield_now().await;
    let dump = async_stack::dump().with_name_containing("instrumented-handler");
    assert_eq!(dump.tasks.len(), 1, "{dump}");
    let frames: Vec<(u32, &str)> = dump.tasks[0]
        .frames
        .iter()
        .map(|f| (f.depth, &*f.function))
        .collect();
    assert_eq!(
        frames,
        [
            (0, "macro_instrument::Handler::route"),
            (1, "macro_instrument::Handler::run"),
        ],
        "{dump}"
    );
    assert!(!dump.to_string().contains("{{closure}}"), "{dump}");
    tx.send(()).unwrap();
    task.await.unwrap();
}
