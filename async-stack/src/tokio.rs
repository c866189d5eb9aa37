//! Spawn helpers for tokio (feature `tokio`).
//!
//! Plain `tokio::spawn(traced_future)` already registers the task: any
//! traced future polled with no traced frame active is a task root. These
//! helpers add what the root cannot know by itself: the spawn location, the
//! spawning task, and a name.

use std::future::Future;

use ::tokio::task::JoinHandle;

use crate::task::spawned;

/// Spawns `fut` on the current tokio runtime, recording this call's
/// location and the current task as the new task's parent.
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
    ::tokio::spawn(spawned(fut))
}

/// Like [`spawn`], and names the task (the name appears in dumps, panic
/// reports and stall reports).
#[track_caller]
pub fn spawn_named<F>(name: impl Into<String>, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    ::tokio::spawn(spawned(fut).named(name))
}
