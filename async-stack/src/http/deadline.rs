//! A connection whose writes must make progress: [`WriteDeadline`] fails
//! a write, flush or shutdown that has waited [`Builder::write_timeout`]
//! for the client to take bytes, so that hyper closes the connection and
//! its slot of [`Builder::max_connections`] is freed.
//!
//! Without it, a client that sends requests and never reads the answers
//! kept its connection open for as long as it stayed connected: hyper
//! waited in the socket's write for ever, and a streamed body's own
//! timeout (`body.rs`) was never seen, since hyper polls the body only
//! after its last write went out. With [`Builder::max_connections`] such
//! clients, nobody else was served.
//!
//! [`Builder::write_timeout`]: super::Builder::write_timeout
//! [`Builder::max_connections`]: super::Builder::max_connections

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, with a deadline on every write that waits for the client.
pub(super) struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    /// Armed when a write first waits, disarmed when one makes progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub(super) fn new(inner: S, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// The outcome of a write-side poll of `inner`: progress disarms the
    /// deadline; waiting arms it (once) and fails with `TimedOut` when it
    /// has passed.
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "async-stack http: the client took no bytes within the write timeout",
        )))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.check(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Writes the other end takes go through, each wait for it ending
    /// when it reads; a write it never takes fails with `TimedOut` once
    /// the timeout has passed, rather than waiting for ever.
    #[test]
    fn a_write_the_client_never_takes_fails() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let (ours, mut theirs) = tokio::io::duplex(64);
            let mut ours = WriteDeadline::new(ours, Duration::from_millis(200));
            let reader = tokio::spawn(async move {
                let mut buf = vec![0; 64 * 10];
                theirs.read_exact(&mut buf).await.unwrap();
                (theirs, buf)
            });
            // Ten times what the pipe holds: every write past the first
            // waits for the reader.
            for i in 0..10u8 {
                ours.write_all(&[i; 64]).await.unwrap();
            }
            let (_theirs, buf) = reader.await.unwrap();
            assert_eq!(buf[64 * 9], 9);
            // Nobody reads any more: the pipe fills, then the write fails.
            ours.write_all(&[0; 64]).await.unwrap();
            let err = ours.write_all(&[0; 1]).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        });
    }
}
