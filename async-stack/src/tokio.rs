//! Spawn helpers for tokio (feature `tokio`).
//!
//! Plain `tokio::spawn(traced_future)` already registers the task: any
//! traced future polled with no traced frame active is a task root. These
//! helpers add what the root cannot know by itself: the spawn location, the
//! spawning task, and a name. They return a [`JoinHandle`] whose `.await`
//! is recorded in the waits-for graph, so that two tasks awaiting each
//! other's handles are reported by [`deadlocks()`](crate::waits::report::deadlocks).

use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};

pub use ::tokio::task::{AbortHandle, Id, JoinError};

use crate::task::spawned;
use crate::task::tokio_task::id_number;
use crate::waits::join_wait::JoinWait;
use crate::waits::resource::Registry;
use crate::waits::waiter::Waiter;

/// An owned permission to await a spawned task: tokio's `JoinHandle`,
/// whose `.await` is recorded as a wait for the spawned task (its traced
/// roots), ended when the task ends or the `.await` is dropped. The wait
/// is at the traced `.await` that polled the handle, and counts only
/// while the awaiting task is suspended there: a handle raced in
/// `select!` on `&mut handle` and kept after another branch won is no
/// wait once the task moved on, until it is polled again.
///
/// Dropping the handle detaches the task, as tokio's does.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let h = async_stack::tokio::spawn(async { 2 });
/// assert!(!h.id().to_string().is_empty());
/// assert_eq!(h.await.unwrap(), 2);
/// # }
/// ```
pub struct JoinHandle<T> {
    /// Before `inner`: the wait ends before the handle goes. From the
    /// first `.await` that waits to the task's end (or the handle's drop),
    /// so a handle polled again and again at one `.await` (`select!` on
    /// `&mut handle` in a loop) records one wait; polled by another task,
    /// or at another `.await`, it records a new one.
    wait: Option<JoinWait>,
    inner: ::tokio::task::JoinHandle<T>,
    spawned_at: &'static Location<'static>,
}

impl<T> JoinHandle<T> {
    fn new(inner: ::tokio::task::JoinHandle<T>, spawned_at: &'static Location<'static>) -> Self {
        JoinHandle {
            wait: None,
            inner,
            spawned_at,
        }
    }

    /// Cancels the task (as tokio's `abort`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let h = async_stack::tokio::spawn(std::future::pending::<()>());
    /// h.abort();
    /// assert!(h.await.unwrap_err().is_cancelled());
    /// # }
    /// ```
    pub fn abort(&self) {
        self.inner.abort();
    }

    /// A handle that can cancel the task without awaiting it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let h = async_stack::tokio::spawn(std::future::pending::<()>());
    /// h.abort_handle().abort();
    /// assert!(h.await.unwrap_err().is_cancelled());
    /// # }
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        self.inner.abort_handle()
    }

    /// Whether the task has ended.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let h = async_stack::tokio::spawn(std::future::pending::<()>());
    /// assert!(!h.is_finished());
    /// # }
    /// ```
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// The task's tokio id, as dumps show it (`TaskInfo::tokio_id`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let h = async_stack::tokio::spawn(async {});
    /// let id = h.id();
    /// h.await.unwrap();
    /// assert!(id.to_string().parse::<u64>().is_ok());
    /// # }
    /// ```
    pub fn id(&self) -> Id {
        self.inner.id()
    }

    /// Where the task was spawned.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let h = async_stack::tokio::spawn(async {}); let line = line!();
    /// assert_eq!(h.spawned_at().line(), line);
    /// # }
    /// ```
    pub fn spawned_at(&self) -> &'static Location<'static> {
        self.spawned_at
    }

    /// tokio's own handle, for code that needs that type; awaiting it is
    /// not recorded.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let h: tokio::task::JoinHandle<u8> = async_stack::tokio::spawn(async { 4 }).into_tokio();
    /// assert_eq!(h.await.unwrap(), 4);
    /// # }
    /// ```
    pub fn into_tokio(self) -> ::tokio::task::JoinHandle<T> {
        let JoinHandle { wait, inner, .. } = self;
        drop(wait);
        inner
    }

    /// Records the wait on the first `.await` that finds the task
    /// unfinished, the common case of `spawn(work()).await`: not cold, but
    /// out of line, so that each `JoinHandle<T>`'s poll stays small.
    #[inline(never)]
    fn start_wait(&mut self) {
        self.start_wait_by(Waiter::now());
    }

    fn start_wait_by(&mut self, waiter: Waiter) {
        // The old wait ends first: its slot may be the one this wait takes.
        self.wait = None;
        let target = id_number(self.inner.id());
        self.wait = JoinWait::start(Registry::global(), waiter, target, self.spawned_at);
    }

    /// A later `Pending`: whoever polls the handle now waits, so a new
    /// record if it is another task (the handle was moved) or another
    /// `.await` (a handle raced in `select!` and kept, then awaited
    /// elsewhere).
    #[inline(never)]
    fn follow(&mut self) {
        let now = Waiter::now();
        if self.wait.as_ref().is_some_and(|w| w.waiter() != Some(now)) {
            self.start_wait_by(now);
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `JoinHandle` is `Unpin` (its fields are).
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll(cx) {
            Poll::Ready(out) => {
                this.wait = None;
                Poll::Ready(out)
            }
            Poll::Pending => {
                if this.wait.is_none() {
                    this.start_wait();
                } else {
                    this.follow();
                }
                Poll::Pending
            }
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.inner.id())
            .field("spawned_at", &self.spawned_at)
            .finish()
    }
}

/// Spawns `fut` on the current tokio runtime, recording this call's
/// location and the current task as the new task's parent.
///
/// The task is registered here, before tokio has it, so that dumps show
/// it while it waits for its first poll (see [`dump`](crate::dump())).
/// The first traced root that registers inside `fut`, on that poll, takes
/// it over; if none does, the task ends there, and the roots that
/// register in later polls are filed under the tokio task as usual.
/// Every root that registers inside `fut`, on any poll, records the
/// task's name, spawn site and parent, so the task keeps them whichever
/// of its roots ends first (a traced handler called once per message, one
/// root after the other). The wrapper that offers them runs about 35
/// instructions on each poll of the task, beside about 115 for a traced
/// root's poll (`target/release/instructions`, the table of the root poll
/// inside a spawn helper's wrapper).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// #[async_stack::traced_async]
/// async fn work() -> u8 { 1 }
///
/// assert_eq!(async_stack::tokio::spawn(work()).await.unwrap(), 1);
/// # }
/// ```
#[track_caller]
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut fut = spawned(fut);
    fut.preregister();
    JoinHandle::new(::tokio::spawn(fut), Location::caller())
}

/// Like [`spawn`], and names the task (the name appears in dumps, panic
/// reports and stall reports).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let h = async_stack::tokio::spawn_named("worker", async { 3 });
/// assert_eq!(h.await.unwrap(), 3);
/// # }
/// ```
#[track_caller]
pub fn spawn_named<F>(name: impl Into<String>, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut fut = spawned(fut).named(name);
    fut.preregister();
    JoinHandle::new(::tokio::spawn(fut), Location::caller())
}
