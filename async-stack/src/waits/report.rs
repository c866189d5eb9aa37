//! The public face of the detector: [`deadlocks()`], [`Deadlock`],
//! [`WaitEdge`] and [`ResourceKind`].

use std::fmt;

use crate::record::location::SourceLocation;
use crate::waits::detect::{Found, Via};
use crate::waits::resource::Kind;

/// The kind of resource a task waits for.
///
/// ```
/// use async_stack::ResourceKind;
/// assert_eq!(ResourceKind::Mutex.to_string(), "Mutex");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum ResourceKind {
    /// An `async_stack` `Mutex`.
    Mutex,
    /// An `async_stack` `RwLock`.
    RwLock,
    /// An `async_stack` `Semaphore`.
    Semaphore,
    /// An `async_stack::tokio::JoinHandle`: the waiter awaits a task's end.
    JoinHandle,
}

impl From<Kind> for ResourceKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Mutex => ResourceKind::Mutex,
            Kind::RwLock => ResourceKind::RwLock,
            Kind::Semaphore => ResourceKind::Semaphore,
            Kind::JoinHandle => ResourceKind::JoinHandle,
        }
    }
}

impl ResourceKind {
    /// Its name, as dumps and reports show it: `Mutex`, `RwLock`,
    /// `Semaphore` or `JoinHandle`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Mutex => "Mutex",
            ResourceKind::RwLock => "RwLock",
            ResourceKind::Semaphore => "Semaphore",
            ResourceKind::JoinHandle => "JoinHandle",
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One edge of a [`Deadlock`]: a task waits for a resource that another
/// task (or itself) holds, or for a task to end.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // With no task waiting, there is no edge at all.
/// assert!(async_stack::deadlocks().iter().all(|d| !d.edges.is_empty()));
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitEdge {
    /// The waiting task's id, as in dumps.
    pub waiter: u64,
    /// The waiting task's name, if it has one.
    pub waiter_name: Option<String>,
    /// Where it waits: the line of the `lock()` or `acquire()` call; for
    /// an awaited `JoinHandle`, the traced `.await` that polled it (the
    /// line of the `select!` or `join!` it is raced or joined in), or,
    /// polled outside any traced `.await`, the `.await` the waiter's
    /// deepest traced frame is suspended at (`None` if that frame is not
    /// at an `.await` it recorded).
    pub waiting_at: Option<SourceLocation>,
    /// What it waits for.
    pub resource: ResourceKind,
    /// Where the resource was created (the spawn site, for a
    /// `JoinHandle`).
    pub created_at: SourceLocation,
    /// The task it waits for.
    pub holder: u64,
    /// Where that task acquired the resource; `None` when it does not hold
    /// it yet ([`queued_ahead`](WaitEdge::queued_ahead)) or for a
    /// `JoinHandle`.
    pub acquired_at: Option<SourceLocation>,
    /// The holder does not hold the resource: it is queued directly ahead
    /// of the waiter, and tokio's queues are first in, first out (a reader
    /// behind a waiting writer waits for that writer). Its own wait is
    /// where it waits. A waiter waits for every task further ahead too,
    /// through this one; a report lists only the one directly ahead.
    pub queued_ahead: Option<SourceLocation>,
}

/// A set of tasks that wait for each other: every task that could let
/// any of them go is one of them, so none will ever run again.
///
/// Its edges come in cycle order, starting from the smallest task id;
/// edges among the same tasks that are not on that cycle follow (a
/// `Semaphore` whose permits are spread over several holders waits for
/// all of them).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// for d in async_stack::deadlocks() {
///     eprintln!("{d}");
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deadlock {
    /// The waits, in cycle order.
    pub edges: Vec<WaitEdge>,
}

impl Deadlock {
    /// The ids of the tasks in the deadlock, smallest first.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// for d in async_stack::deadlocks() {
    ///     assert!(!d.tasks().is_empty());
    /// }
    /// # }
    /// ```
    pub fn tasks(&self) -> Vec<u64> {
        let mut t: Vec<u64> = self.edges.iter().map(|e| e.waiter).collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

impl fmt::Display for Deadlock {
    /// A report in the manner of Go's: a heading, then one paragraph per
    /// edge.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tasks().len() {
            1 => f.write_str("deadlock: 1 task waits for itself")?,
            n => write!(f, "deadlock: {n} tasks wait for each other")?,
        }
        for e in &self.edges {
            write!(f, "\n\n{e}")?;
        }
        Ok(())
    }
}

impl fmt::Display for WaitEdge {
    /// `task 7 "a" waits at src/bank.rs:41:9 for Mutex created at
    /// src/bank.rs:12:15, held by task 9 (acquired at src/bank.rs:30:9)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.waiter)?;
        if let Some(name) = &self.waiter_name {
            write!(f, " {name:?}")?;
        }
        f.write_str(" waits")?;
        if let Some(at) = &self.waiting_at {
            write!(f, " at {at}")?;
        }
        if self.resource == ResourceKind::JoinHandle {
            return write!(
                f,
                " for the end of task {}, spawned at {}",
                self.holder, self.created_at
            );
        }
        write!(f, " for {} created at {}, ", self.resource, self.created_at)?;
        match (&self.queued_ahead, &self.acquired_at) {
            (Some(ahead), _) => {
                write!(f, "queued behind task {} (waiting at {ahead})", self.holder)
            }
            (None, Some(at)) => write!(f, "held by task {} (acquired at {at})", self.holder),
            (None, None) => write!(f, "held by task {}", self.holder),
        }
    }
}

impl From<Found> for Deadlock {
    fn from(found: Found) -> Self {
        let edges = found
            .edges
            .into_iter()
            .map(|e| WaitEdge {
                waiter: e.waiter,
                waiter_name: e.waiter_name,
                waiting_at: e.wait.at.map(SourceLocation::of).or(e.awaiting_at),
                resource: e.resource.kind.into(),
                created_at: SourceLocation::of(e.resource.created_at),
                holder: e.blocker,
                acquired_at: match e.via {
                    Via::Holds(h) => Some(SourceLocation::of(h.at)),
                    _ => None,
                },
                queued_ahead: match e.via {
                    Via::QueuedAhead(w) => w.at.map(SourceLocation::of),
                    _ => None,
                },
            })
            .collect();
        Deadlock { edges }
    }
}

/// The deadlocks among tasks that wait for wrapped resources
/// (`Mutex`, `RwLock`, `Semaphore`, and awaited `async_stack::tokio`
/// `JoinHandle`s), right now.
///
/// Exact, never guessed: a deadlock is reported only if every one of its
/// waits, holds and idle tasks was read twice, unchanged, so that the
/// whole of it existed at one instant. Reading blocks no task (beyond the
/// copy of one resource's short lists under its lock) and costs nothing
/// while no task waits.
///
/// What it cannot see: waits for anything else (channels, `Notify`, locks
/// of other crates), and branches of a task that are not traced roots (a
/// task waiting in a `select!` whose other branch awaits a channel is
/// reported even though a message could free it). Waits and holds outside
/// any traced root belong to an unknown task, which is never reported and
/// never counted as stuck; so does a read lock or a permit whose hold is
/// being recorded, over and over, while `deadlocks()` reads it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert!(async_stack::deadlocks().is_empty());
/// # }
/// ```
#[cfg(not(async_stack_loom))]
pub fn deadlocks() -> Vec<Deadlock> {
    use crate::waits::detect::detect;
    use crate::waits::resource::Registry;
    use crate::waits::tasks::Tasks;
    detect(Registry::global(), Tasks::read)
        .into_iter()
        .map(Deadlock::from)
        .collect()
}
