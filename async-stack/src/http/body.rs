//! Response bodies: whole, or streamed from a writer on a blocking thread.
//!
//! A streamed body is fed by a function that writes to an [`io::Write`]
//! (the dump's `write_text` and `write_json`), run on a blocking thread of
//! the runtime that serves the request. Its writes, about 32 KB each (the
//! dump's own buffer), go through a channel of [`CHUNKS`] chunks to the
//! connection, so a response holds at most that many chunks in memory,
//! however many tasks there are. A write waits for room in the channel at
//! most the write timeout: a client that stops reading makes the writer
//! fail (`TimedOut`), and one that goes away makes it fail at once
//! (`BrokenPipe`); either way, the writer writes nothing more. A body
//! whose writer failed ends with an error rather than its last chunk, so
//! that the client sees a cut response as cut, never as a short one.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
// `std`'s, not `crate::shim`'s: a flag between the body's writer thread
// and the response, in the debug endpoint, which loom does not model
// (it is not built under loom).
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body as HttpBody, Frame};
use tokio::runtime::Handle;
use tokio::sync::mpsc;

/// The body of every response.
pub(super) type Body = BoxBody<Bytes, io::Error>;

/// Chunks in flight between a streaming writer and its connection.
const CHUNKS: usize = 4;

/// A body of `bytes`, whole.
pub(super) fn full(bytes: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A body streamed from what `write` writes, on a blocking thread; each
/// chunk waits for the client at most `write_timeout`.
pub(super) fn streamed(
    write_timeout: Duration,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()> + Send + 'static,
) -> Body {
    let (tx, rx) = mpsc::channel(CHUNKS);
    let handle = Handle::current();
    let complete = Arc::new(AtomicBool::new(false));
    let completed = complete.clone();
    // The task is detached: it ends when `write` returns, which it does
    // soon after the receiver is gone or a send times out.
    drop(tokio::task::spawn_blocking(move || {
        let mut out = ChannelWriter {
            tx,
            handle,
            write_timeout,
        };
        if write(&mut out).is_ok() {
            // Before `out`, and with it the sender, is dropped: the
            // receiver sees the flag once it sees the channel closed.
            completed.store(true, Ordering::Release);
        }
    }));
    Streamed { rx, complete }.boxed()
}

/// The receiving end of a streamed body.
struct Streamed {
    rx: mpsc::Receiver<Bytes>,
    /// Set when the writer finished without an error.
    complete: Arc<AtomicBool>,
}

impl HttpBody for Streamed {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(bytes)) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            Poll::Ready(None) if self.complete.load(Ordering::Acquire) => Poll::Ready(None),
            Poll::Ready(None) => Poll::Ready(Some(Err(io::Error::other(
                "async-stack http: the streamed dump was abandoned",
            )))),
        }
    }
}

/// The sending end: each write is one chunk.
struct ChannelWriter {
    tx: mpsc::Sender<Bytes>,
    handle: Handle,
    write_timeout: Duration,
}

impl io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let chunk = Bytes::copy_from_slice(buf);
        // On a blocking thread, outside the runtime's own threads:
        // `block_on` waits on the runtime's timer, driven by its thread.
        let sent = self.handle.block_on(async {
            tokio::time::timeout(self.write_timeout, self.tx.send(chunk)).await
        });
        match sent {
            Ok(Ok(())) => Ok(buf.len()),
            Ok(Err(_)) => Err(io::ErrorKind::BrokenPipe.into()),
            Err(_) => Err(io::ErrorKind::TimedOut.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
