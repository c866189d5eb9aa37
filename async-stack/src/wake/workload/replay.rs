//! The replay: a workload's tasks, spawned on the current tokio runtime,
//! run until told to stop, then stopped and counted.
//!
//! # Lifecycle
//!
//! [`replay_until`] validates the workload, then builds every channel and
//! spawns every task (each with its entry's name, through
//! [`crate::tokio::spawn_named`]; each task's root is a `.traced()` future,
//! so it is a task root in dumps and profiles). The tasks are:
//!
//! - a **consumer instance** owns the receiving end of its own bounded
//!   channel ([`Workload::CHANNEL_CAPACITY`]) and, when its producer waits
//!   for replies, a clone of the sending end of the group's reply channel;
//! - a **producer** owns the sending ends of all its group's consumer
//!   channels and the receiving end of the reply channel. The reply channel
//!   is unbounded, but holds at most `fan_out` replies: the producer sends
//!   that many messages per cycle, then awaits as many replies;
//! - an **independent instance** owns nothing but its counters.
//!
//! Each entry has one `Stats` shared by its instances: iterations and
//! busy time, added with relaxed atomics (read only after every task is
//! gone).
//!
//! When the `stop` future completes, the replay sets the shared `stopping`
//! flag (a task spinning through its busy time checks it and stops
//! spinning, so no poll outlasts the flag by more than one check), aborts
//! every task, and awaits every one: when [`replay_until`] returns, every
//! task's future has been dropped, so every channel is closed and no task
//! of the replay is left in the runtime or in a dump. If the replay's own
//! future is dropped before that (a timeout around it, say), the same flag
//! is set and the same aborts are issued from its `Drop`; the tasks then end
//! at their next poll, without anyone waiting for them.
//!
//! The `stop` future and the replay's own future need a thread to run
//! on: when every worker thread of the runtime is inside a task's busy
//! time, the stop waits until one of those ends (then the flag ends all the
//! others at once). A replay with long busy times wants more worker threads
//! than busy tasks, as the program it stands for did.

use std::fmt;
use std::future::Future;
use std::hint::black_box;
// `std`'s, not `crate::shim`'s: the replay's own stop flag and counters,
// shared by the tasks it runs, are no protocol of the crate's; loom has
// nothing to model in them.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::tokio::JoinHandle;
use ::tokio::sync::mpsc;

use super::{Workload, WorkloadError};
use crate::task::traced::TracedExt;

/// Replays `workload` on the current tokio runtime for `duration`, then
/// stops every task and reports what each kind of task did.
///
/// The workload is validated first ([`Workload::validate`]): an invalid one
/// is rejected with the same error reading it would give, and nothing is
/// spawned. `duration` is usually `Duration::from_millis(workload.duration_ms)`.
///
/// # Panics
///
/// Outside a tokio runtime, or on a runtime without its timer enabled
/// (tokio's own panics, from spawning and sleeping).
///
/// ```
/// use std::time::Duration;
/// use async_stack::workload::{replay, Independent, Role, Workload};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), async_stack::workload::WorkloadError> {
/// let workload = Workload {
///     version: 1,
///     duration_ms: 50,
///     groups: vec![],
///     independent: vec![Independent {
///         name: "tick".into(),
///         instances: 2,
///         busy_us_per_wake: 100,
///         period_us: 5_000,
///     }],
/// };
/// let report = replay(&workload, Duration::from_millis(50)).await?;
/// assert_eq!(report.tasks[0].name, "tick");
/// assert_eq!(report.tasks[0].role, Role::Independent);
/// assert_eq!(report.tasks[0].instances, 2);
/// # Ok(())
/// # }
/// ```
pub async fn replay(
    workload: &Workload,
    duration: Duration,
) -> Result<ReplayReport, WorkloadError> {
    replay_until(workload, ::tokio::time::sleep(duration)).await
}

/// Replays `workload` on the current tokio runtime until `stop` completes,
/// then stops every task and reports what each kind of task did.
///
/// Like [`replay`], with the end chosen by the caller (a signal, a
/// channel, a test that has seen what it needed). When this returns, every
/// task of the replay has ended and its channels are closed. Dropping the
/// future before that aborts every task (they end at their next poll).
///
/// # Panics
///
/// Outside a tokio runtime, or on a runtime without its timer enabled.
pub async fn replay_until(
    workload: &Workload,
    stop: impl Future<Output = ()>,
) -> Result<ReplayReport, WorkloadError> {
    workload.validate()?;
    let start = Instant::now();
    let (mut tasks, entries) = spawn_all(workload);
    stop.await;
    let elapsed = start.elapsed();
    tasks.stop().await;
    let tasks = entries
        .into_iter()
        .map(|e| {
            let busy = Duration::from_nanos(e.stats.busy_ns.load(Ordering::Relaxed));
            let window = elapsed.as_secs_f64() * f64::from(e.instances);
            TaskReport {
                name: e.name,
                role: e.role,
                instances: e.instances,
                iterations: e.stats.iterations.load(Ordering::Relaxed),
                busy,
                busy_fraction: if window > 0.0 {
                    busy.as_secs_f64() / window
                } else {
                    0.0
                },
            }
        })
        .collect();
    Ok(ReplayReport { elapsed, tasks })
}

/// What a replay did: one [`TaskReport`] per producer, consumer and
/// independent entry, in the workload's order (each group's producer, then
/// its consumers; then the independent entries).
///
/// `Display` writes one line per entry:
///
/// ```text
/// replayed 2.00s, 7 tasks
///   producer     reader        1 instance       297 cycles busy   3.0%
///   consumer     parser        3 instances      891 wakes  busy  15.4%
///   producer     client        1 instance       487 cycles busy   3.2%
///   consumer     server        1 instance       487 wakes  busy   8.6%
///   independent  heartbeat     1 instance       170 wakes  busy   0.4%
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayReport {
    /// From the first spawn to the stop.
    pub elapsed: Duration,
    /// One report per entry of the workload.
    pub tasks: Vec<TaskReport>,
}

/// What the tasks of one entry (all its instances together) did.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskReport {
    /// The entry's name: every instance's task name.
    pub name: String,
    /// Which kind of entry.
    pub role: Role,
    /// How many tasks were spawned for it.
    pub instances: u32,
    /// Loops completed, over all instances: for a producer, cycles whose
    /// messages were all sent (and replies received, if it waits for
    /// them), whether or not their sleep was over; for a consumer, messages
    /// handled (burnt for, and replied to if asked); for an independent
    /// task, periods slept and burnt for.
    pub iterations: u64,
    /// Time spent burning CPU, over all instances.
    pub busy: Duration,
    /// `busy` over `elapsed` × `instances`: the share of its time an
    /// average instance was busy, from 0 to about 1.
    pub busy_fraction: f64,
}

/// The kind of a workload entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A group's producer ([`super::Producer`]).
    Producer,
    /// A group's consumer ([`super::Consumer`]).
    Consumer,
    /// An independent entry ([`super::Independent`]).
    Independent,
}

impl Role {
    /// What one iteration of this role is called: `cycles` or `wakes`.
    fn iterations(self) -> &'static str {
        match self {
            Role::Producer => "cycles",
            Role::Consumer | Role::Independent => "wakes",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Role::Producer => "producer",
            Role::Consumer => "consumer",
            Role::Independent => "independent",
        })
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: u64 = self.tasks.iter().map(|t| u64::from(t.instances)).sum();
        write!(
            f,
            "replayed {:.2}s, {total} task{}",
            self.elapsed.as_secs_f64(),
            if total == 1 { "" } else { "s" }
        )?;
        let width = self.tasks.iter().map(|t| t.name.len()).max().unwrap_or(0);
        for t in &self.tasks {
            write!(
                f,
                "\n  {:<12} {:<width$} {:>5} instance{:<1} {:>8} {:<6} busy {:>5.1}%",
                t.role,
                t.name,
                t.instances,
                if t.instances == 1 { "" } else { "s" },
                t.iterations,
                t.role.iterations(),
                t.busy_fraction * 100.0,
            )?;
        }
        Ok(())
    }
}

/// Counters shared by the instances of one entry.
#[derive(Default)]
struct Stats {
    iterations: AtomicU64,
    busy_ns: AtomicU64,
}

impl Stats {
    fn iteration(&self) {
        self.iterations.fetch_add(1, Ordering::Relaxed);
    }

    /// Burns `busy` of CPU (see [`burn`]) and counts it.
    fn burn(&self, busy: Duration, stopping: &AtomicBool) {
        let spent = burn(busy, stopping);
        let ns = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        self.busy_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

/// One entry of the workload, as the report will show it.
struct Entry {
    name: String,
    role: Role,
    instances: u32,
    stats: Arc<Stats>,
}

/// Every task of a replay, and the flag that stops their busy loops. See
/// the module docs for how they end.
struct Tasks {
    handles: Vec<JoinHandle<()>>,
    stopping: Arc<AtomicBool>,
}

impl Tasks {
    fn spawn(
        &mut self,
        name: &str,
        fut: impl Future<Output = ()> + Send + 'static,
        root: &'static str,
    ) {
        self.handles
            .push(crate::tokio::spawn_named(name, fut.traced_named(root)));
    }

    fn abort_all(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        for h in &self.handles {
            h.abort();
        }
    }

    /// Stops every task and waits until each has ended.
    async fn stop(&mut self) {
        self.abort_all();
        for h in std::mem::take(&mut self.handles) {
            if let Err(e) = h.await
                && e.is_panic()
            {
                // A bug of this module (the tasks panic on no input):
                // the caller's panic, as if the task had been its own code.
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.abort_all();
    }
}

/// Builds the channels and spawns every task of `workload`, which has been
/// validated.
fn spawn_all(workload: &Workload) -> (Tasks, Vec<Entry>) {
    let stopping = Arc::new(AtomicBool::new(false));
    let mut tasks = Tasks {
        handles: Vec::new(),
        stopping: stopping.clone(),
    };
    let mut entries = Vec::new();
    let mut entry = |name: &str, role, instances| {
        let stats = Arc::new(Stats::default());
        entries.push(Entry {
            name: name.to_owned(),
            role,
            instances,
            stats: stats.clone(),
        });
        stats
    };
    for group in &workload.groups {
        let p = &group.producer;
        let producer_stats = entry(&p.name, Role::Producer, 1);
        let (reply_tx, reply_rx) = if p.waits_for_replies {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let mut outboxes = Vec::new();
        for consumer in &group.consumers {
            let stats = entry(&consumer.name, Role::Consumer, consumer.instances);
            for _ in 0..consumer.instances {
                let (tx, rx) = mpsc::channel(Workload::CHANNEL_CAPACITY);
                outboxes.push(tx);
                tasks.spawn(
                    &consumer.name,
                    consume(
                        rx,
                        reply_tx.clone(),
                        Duration::from_micros(consumer.busy_us_per_wake),
                        stopping.clone(),
                        stats.clone(),
                    ),
                    "async_stack::workload::consume",
                );
            }
        }
        // The consumers hold the only reply senders: when they are gone,
        // the producer's wait for replies ends.
        drop(reply_tx);
        tasks.spawn(
            &p.name,
            produce(
                Cycle {
                    busy: Duration::from_micros(p.busy_us_per_cycle),
                    sleep: Duration::from_micros(p.sleep_us_per_cycle),
                    fan_out: p.fan_out,
                },
                outboxes,
                reply_rx,
                stopping.clone(),
                producer_stats,
            ),
            "async_stack::workload::produce",
        );
    }
    for independent in &workload.independent {
        let stats = entry(&independent.name, Role::Independent, independent.instances);
        for _ in 0..independent.instances {
            tasks.spawn(
                &independent.name,
                tick(
                    Duration::from_micros(independent.period_us),
                    Duration::from_micros(independent.busy_us_per_wake),
                    stopping.clone(),
                    stats.clone(),
                ),
                "async_stack::workload::tick",
            );
        }
    }
    (tasks, entries)
}

/// A producer's cycle, in the units the loop uses.
struct Cycle {
    busy: Duration,
    sleep: Duration,
    fan_out: u32,
}

/// A producer: burn, send `fan_out` messages round-robin, await as many
/// replies (if it has a reply channel), sleep. Ends when the replay stops
/// or a channel closes.
async fn produce(
    cycle: Cycle,
    outboxes: Vec<mpsc::Sender<()>>,
    mut replies: Option<mpsc::UnboundedReceiver<()>>,
    stopping: Arc<AtomicBool>,
    stats: Arc<Stats>,
) {
    let mut next = 0;
    while !stopping.load(Ordering::Relaxed) {
        stats.burn(cycle.busy, &stopping);
        for _ in 0..cycle.fan_out {
            let Some(outbox) = outboxes.get(next) else {
                return;
            };
            if outbox.send(()).await.is_err() {
                return;
            }
            next = (next + 1) % outboxes.len();
        }
        if let Some(replies) = &mut replies {
            for _ in 0..cycle.fan_out {
                if replies.recv().await.is_none() {
                    return;
                }
            }
        }
        stats.iteration();
        if !cycle.sleep.is_zero() {
            ::tokio::time::sleep(cycle.sleep).await;
        }
    }
}

/// A consumer instance: per message, burn, then reply if asked. Ends when
/// the replay stops or a channel closes.
async fn consume(
    mut inbox: mpsc::Receiver<()>,
    reply: Option<mpsc::UnboundedSender<()>>,
    busy: Duration,
    stopping: Arc<AtomicBool>,
    stats: Arc<Stats>,
) {
    while inbox.recv().await.is_some() {
        if stopping.load(Ordering::Relaxed) {
            return;
        }
        stats.burn(busy, &stopping);
        stats.iteration();
        if let Some(reply) = &reply
            && reply.send(()).is_err()
        {
            return;
        }
    }
}

/// An independent instance: sleep `period`, burn `busy`, until the replay
/// stops.
async fn tick(period: Duration, busy: Duration, stopping: Arc<AtomicBool>, stats: Arc<Stats>) {
    while !stopping.load(Ordering::Relaxed) {
        ::tokio::time::sleep(period).await;
        stats.burn(busy, &stopping);
        stats.iteration();
    }
}

/// Spins on the CPU until `busy` of wall time has passed or `stopping` is
/// set, and returns the time spent. Not inlined, so that profiles of a
/// replay show the busy time under `burn`.
#[inline(never)]
fn burn(busy: Duration, stopping: &AtomicBool) -> Duration {
    let start = Instant::now();
    if busy.is_zero() {
        return Duration::ZERO;
    }
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    loop {
        // A few hundred nanoseconds of arithmetic between clock reads,
        // which the optimiser cannot remove.
        for _ in 0..64 {
            x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
        let spent = start.elapsed();
        if spent >= busy || stopping.load(Ordering::Relaxed) {
            return spent;
        }
    }
}

#[cfg(test)]
mod tests;
