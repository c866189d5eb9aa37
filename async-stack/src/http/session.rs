//! The timed routes: a sampler profile (`profile`, `folded`) and a wake
//! recording (`wakes`), each N seconds long, one at a time of each kind.
//!
//! # One at a time
//!
//! A session holds its kind's [`SessionLock`] from its start to its end; a
//! request that finds the lock taken is answered `409 Conflict`. The locks
//! are process-wide, so two endpoints (a [`serve`](super::serve) and a
//! [`router()`](super#in-an-axum-service-feature-axum)) share them: the
//! wake recording is process-wide too, and two on-CPU samplers would
//! share the per-thread timers.
//!
//! # Ends
//!
//! A session ends when its N seconds are over, or when the request is
//! dropped (the client went away, or the server stopped): the lock is
//! released, the sampler stopped and the wake recording restored as it was
//! before, by the guards' `Drop`, whichever way the session ends.

// `std`'s, not `crate::shim`'s: the endpoint's one-session flag, a plain
// try-lock that loom does not model (the endpoint is not built under
// loom).
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::sampler::{Profile, Sampler};
use crate::wake;

/// One kind of session's "in progress" flag.
pub(super) struct SessionLock {
    busy: AtomicBool,
    what: &'static str,
}

/// The sampler profiles (`profile` and `folded`).
pub(super) static SAMPLER: SessionLock = SessionLock::new("a profile");
/// The wake recordings.
pub(super) static WAKES: SessionLock = SessionLock::new("a wake recording");

impl SessionLock {
    const fn new(what: &'static str) -> Self {
        SessionLock {
            busy: AtomicBool::new(false),
            what,
        }
    }

    /// Takes the lock, or says (in one line) what holds it.
    pub(super) fn take(&'static self) -> Result<SessionGuard, String> {
        if self.busy.swap(true, Ordering::Acquire) {
            return Err(format!(
                "{} is already running; try again when it ends",
                self.what
            ));
        }
        Ok(SessionGuard(self))
    }
}

/// A taken [`SessionLock`], released on drop.
pub(super) struct SessionGuard(&'static SessionLock);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// Samples every task for `seconds` (on-CPU too, on Linux, unless the
/// program runs an on-CPU sampler of its own, which the process can have
/// only one of: the profile is then wall-clock only), holding `lock`, and
/// returns the profile. A drop before the end stops the sampler (its
/// `Drop`) and releases the lock.
pub(super) async fn sample(_lock: SessionGuard, seconds: u64) -> Result<Profile, String> {
    let started = match Sampler::builder().on_cpu(cfg!(target_os = "linux")).start() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Sampler::builder().start(),
        started => started,
    };
    let sampler = started.map_err(|e| format!("the sampler did not start: {e}"))?;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    // Stopping joins the sampler thread and drains its last samples.
    tokio::task::spawn_blocking(move || sampler.stop())
        .await
        .map_err(|e| format!("the sampler failed: {e}"))
}

/// Records the wake graph for `seconds`, holding `lock`, and returns the
/// graph: everything recorded so far, which includes what an earlier
/// recording kept (nothing is reset, so that the program's own use of
/// [`wake`] sees what it recorded). Recording is held on meanwhile, not
/// set: when the request ends it is as the program left it, even if the
/// program turned it on or off during the request.
pub(super) async fn record_wakes(
    _lock: SessionGuard,
    seconds: u64,
) -> Result<wake::WakeGraph, String> {
    let _hold = wake::hold_recording();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    // Copying every task's counters is not for the event loop.
    tokio::task::spawn_blocking(wake::graph)
        .await
        .map_err(|e| format!("reading the wake graph failed: {e}"))
}
