//! A stall detector: a watchdog thread that reports tasks stuck inside a
//! poll (running without yielding) and, optionally, tasks idle for too long.
//!
//! It reads the same non-blocking dumps as [`crate::dump()`], so it never
//! pauses a task, and each check reads two words of every task and copies
//! the stacks only of tasks already past a threshold, one at a time
//! ([`crate::read::dump::live_tasks`]), so it stays cheap with many tasks. Each stall is reported once: a task is reported again only
//! after it has left the stalled state (yielded, or been woken) and stalled
//! anew.
//!
//! # Defaults
//!
//! The terms follow tokio-metrics: *running* is time inside one poll (what
//! tokio-metrics measures against its slow-poll threshold), *idle* is time
//! from the end of a poll until the next wake (its idle duration). Its
//! default slow-poll threshold, 50 µs, is made for counting polls, not for
//! printing a stack per poll, and task states here are stamped with a
//! coarse clock (a few milliseconds), so the defaults are:
//!
//! - running threshold: 100 ms (a poll that long blocks its worker thread
//!   for every other task on it);
//! - idle threshold: off (idle tasks are normal: servers wait for input);
//! - check interval: a quarter of the smallest threshold, at least 10 ms;
//! - deadlocks: off; [`WatchdogBuilder::deadlocks`] turns on a search at
//!   every check, each new deadlock reported once.
//!
//! ```no_run
//! use std::time::Duration;
//! let _watchdog = async_stack::stall::Watchdog::builder()
//!     .running_threshold(Duration::from_millis(250))
//!     .spawn()
//!     .unwrap();
//! ```

use std::collections::HashSet;
use std::io::Write;
// `std`'s, not `crate::shim`'s: the watchdog's stop flag, set once by the
// guard's drop and polled by its thread, is no protocol loom needs to see.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::read::dump::{TaskInfo, format_duration};
use crate::task::TaskState;
use crate::waits::report::Deadlock;
#[cfg(not(async_stack_loom))]
use crate::waits::report::deadlocks;

/// Under loom the waits-for graph has only its models.
#[cfg(async_stack_loom)]
fn deadlocks() -> Vec<Deadlock> {
    Vec::new()
}

/// Why a task was reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StallKind {
    /// Inside one poll for longer than the running threshold.
    Running,
    /// Idle (not woken) for longer than the idle threshold.
    Idle,
}

/// One stalled task.
#[derive(Clone, Debug)]
pub struct StallReport {
    /// What kind of stall.
    pub kind: StallKind,
    /// The task, with its stack at the moment of the check.
    pub task: TaskInfo,
}

impl std::fmt::Display for StallReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            StallKind::Running => "has been running without yielding for",
            StallKind::Idle => "has been idle for",
        };
        write!(f, "async-stack: stall: task {}", self.task.id)?;
        if let Some(tokio_id) = self.task.tokio_id {
            write!(f, " (tokio task {tokio_id})")?;
        }
        writeln!(f, " {what} {}", format_duration(self.task.time_in_state()))?;
        write!(f, "{}", self.task)
    }
}

type Callback = Arc<dyn Fn(&StallReport) + Send + Sync>;
type DeadlockCallback = Arc<dyn Fn(&Deadlock) + Send + Sync>;

/// Configures a [`Watchdog`].
#[derive(Clone)]
pub struct WatchdogBuilder {
    running: Duration,
    idle: Option<Duration>,
    interval: Option<Duration>,
    callback: Option<Callback>,
    /// Whether each check also looks for deadlocks, and what it calls for
    /// each new one.
    deadlocks: bool,
    on_deadlock: Option<DeadlockCallback>,
}

impl std::fmt::Debug for WatchdogBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchdogBuilder")
            .field("running", &self.running)
            .field("idle", &self.idle)
            .field("interval", &self.interval)
            .field("deadlocks", &self.deadlocks)
            .finish_non_exhaustive()
    }
}

/// Default running threshold (see the module docs).
pub const DEFAULT_RUNNING_THRESHOLD: Duration = Duration::from_millis(100);

/// The shortest check interval [`WatchdogBuilder::spawn`] accepts: 1 ms.
/// Task states are stamped with a clock of a few milliseconds' resolution,
/// so checking more often finds nothing new, and an interval of zero would
/// keep a core busy.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

impl WatchdogBuilder {
    /// Report tasks inside one poll longer than this (default 100 ms).
    pub fn running_threshold(mut self, t: Duration) -> Self {
        self.running = t;
        self
    }

    /// Also report tasks idle longer than this (default: off).
    pub fn idle_threshold(mut self, t: Duration) -> Self {
        self.idle = Some(t);
        self
    }

    /// How often to check (default: a quarter of the smallest threshold,
    /// at least 10 ms).
    ///
    /// An interval below [`MIN_INTERVAL`] (1 ms) is rejected, not clamped:
    /// [`spawn`](Self::spawn) then returns an error of kind
    /// [`InvalidInput`](std::io::ErrorKind::InvalidInput).
    pub fn interval(mut self, t: Duration) -> Self {
        self.interval = Some(t);
        self
    }

    /// Called for each stall instead of printing it to stderr.
    pub fn on_stall(mut self, f: impl Fn(&StallReport) + Send + Sync + 'static) -> Self {
        self.callback = Some(Arc::new(f));
        self
    }

    /// Also look for deadlocks at every check (default: off): tasks that
    /// wait for each other through `async_stack::sync`'s locks and
    /// semaphores or the spawn helpers' `JoinHandle`s (see
    /// [`deadlocks()`](crate::waits::report::deadlocks)). Each deadlock is
    /// reported once, printed to stderr unless [`on_deadlock`] says
    /// otherwise; it is reported again only if it dissolves (a member is
    /// aborted or dropped) and forms anew.
    ///
    /// [`on_deadlock`]: WatchdogBuilder::on_deadlock
    ///
    /// ```no_run
    /// let _watchdog = async_stack::stall::Watchdog::builder()
    ///     .deadlocks(true)
    ///     .spawn()
    ///     .unwrap();
    /// ```
    pub fn deadlocks(mut self, on: bool) -> Self {
        self.deadlocks = on;
        self
    }

    /// Called for each new deadlock instead of printing it to stderr
    /// (implies [`deadlocks(true)`](WatchdogBuilder::deadlocks)).
    pub fn on_deadlock(mut self, f: impl Fn(&Deadlock) + Send + Sync + 'static) -> Self {
        self.deadlocks = true;
        self.on_deadlock = Some(Arc::new(f));
        self
    }

    /// Starts the watchdog thread. Errors if a threshold is zero, the
    /// interval is below [`MIN_INTERVAL`] (both of kind
    /// [`InvalidInput`](std::io::ErrorKind::InvalidInput)), or the thread
    /// cannot be spawned.
    pub fn spawn(self) -> std::io::Result<Watchdog> {
        if self.running.is_zero() || self.idle.is_some_and(|i| i.is_zero()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "stall thresholds must be greater than zero",
            ));
        }
        if let Some(interval) = self.interval.filter(|&i| i < MIN_INTERVAL) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "stall check interval {interval:?} is below the minimum of \
                     {MIN_INTERVAL:?} (async_stack::stall::MIN_INTERVAL)"
                ),
            ));
        }
        let smallest = self.idle.map_or(self.running, |i| i.min(self.running));
        let interval = self
            .interval
            .unwrap_or_else(|| (smallest / 4).max(Duration::from_millis(10)));
        let callback: Callback = self.callback.unwrap_or_else(|| {
            Arc::new(|r: &StallReport| {
                let _ = write!(std::io::stderr().lock(), "{r}");
            })
        });
        let on_deadlock: Option<DeadlockCallback> = self.deadlocks.then(|| {
            self.on_deadlock.unwrap_or_else(|| {
                Arc::new(|d: &Deadlock| {
                    let _ = writeln!(std::io::stderr().lock(), "async-stack: {d}\n");
                })
            })
        });
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let (running, idle) = (self.running, self.idle);
        let thread = std::thread::Builder::new()
            .name("async-stack-watchdog".into())
            .spawn(move || {
                let mut reported: HashSet<(StalledTask, StallKind)> = HashSet::new();
                let mut known_deadlocks = HashSet::new();
                while !stop2.load(Ordering::Acquire) {
                    check(running, idle, &mut reported, &*callback);
                    if let Some(on_deadlock) = &on_deadlock {
                        check_deadlocks(&mut known_deadlocks, &**on_deadlock);
                    }
                    std::thread::park_timeout(interval);
                }
            })?;
        Ok(Watchdog {
            stop,
            thread: Some(thread),
        })
    }
}

/// One pass: report new stalls, forget stalls that ended.
fn check(
    running: Duration,
    idle: Option<Duration>,
    reported: &mut HashSet<(StalledTask, StallKind)>,
    callback: &(dyn Fn(&StallReport) + Send + Sync),
) {
    // Only tasks already over a threshold are read in full (a pass over
    // 100,000 calm tasks reads two words of each), one at a time into one
    // scratch task; what is read is then classified again, as it may have
    // moved on in between. Only a new stall is copied, into its report.
    let mut still = HashSet::new();
    crate::read::dump::live_tasks()
        .filter(|status| stall_kind(status.state, status.time_in_state(), running, idle).is_some())
        .for_each(|task| {
            let Some(kind) = stall_kind(task.state, task.time_in_state(), running, idle) else {
                return;
            };
            // One report per episode: the key stays while the task stays
            // stalled, and is forgotten at the first check that finds it
            // not. A tokio task is known by its tokio id, which stays
            // while its roots come and go.
            let who = match task.tokio_id {
                Some(id) => StalledTask::Tokio(id),
                None => StalledTask::Task(task.id),
            };
            let key = (who, kind);
            still.insert(key);
            if reported.insert(key) {
                callback(&StallReport {
                    kind,
                    task: task.clone(),
                });
            }
        });
    reported.retain(|k| still.contains(k));
}

/// One pass of deadlock detection: reports the deadlocks not reported
/// yet, forgets those that dissolved. A deadlock is known by its edges'
/// waiters and holders, which stay while it lasts.
fn check_deadlocks(
    known: &mut HashSet<Vec<(u64, u64)>>,
    callback: &(dyn Fn(&Deadlock) + Send + Sync),
) {
    let mut still = HashSet::new();
    for d in deadlocks() {
        let mut key: Vec<(u64, u64)> = d.edges.iter().map(|e| (e.waiter, e.holder)).collect();
        key.sort_unstable();
        if known.insert(key.clone()) {
            callback(&d);
        }
        still.insert(key);
    }
    known.retain(|k| still.contains(k));
}

/// Who stalled: a task of its own, or a tokio task (whatever roots it
/// has at each check).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum StalledTask {
    Task(u64),
    Tokio(u64),
}

/// The stall a task in `state` for `in_state` is in, if any.
fn stall_kind(
    state: TaskState,
    in_state: Duration,
    running: Duration,
    idle: Option<Duration>,
) -> Option<StallKind> {
    match state {
        TaskState::Running if in_state >= running => Some(StallKind::Running),
        TaskState::Idle if idle.is_some_and(|i| in_state >= i) => Some(StallKind::Idle),
        _ => None,
    }
}

/// A running stall detector; stops when dropped.
#[derive(Debug)]
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// A builder with the defaults described in the module docs.
    pub fn builder() -> WatchdogBuilder {
        WatchdogBuilder {
            running: DEFAULT_RUNNING_THRESHOLD,
            idle: None,
            interval: None,
            callback: None,
            deadlocks: false,
            on_deadlock: None,
        }
    }

    /// Stops the watchdog and waits for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shutdown();
    }
}
