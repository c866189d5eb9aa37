//! The **waits-for graph**: who holds each wrapped resource, who waits for
//! it, and the deadlocks among them (feature `tokio` for the wrappers that
//! write it; the graph itself is runtime-agnostic).
//!
//! # The protocol
//!
//! Each wrapped resource (`Mutex`, `RwLock`, `Semaphore` of the `locks`
//! module) owns a `Resource`: its kind, its creation site, and two kinds of
//! records. An awaited `JoinHandle` has one waiter and no holder, so its
//! wait takes a slot of the registry's join arena instead (`join.rs`):
//! no allocation and no lock, where a resource per handle cost three
//! allocations and two turns of the registry's lock; readers copy each
//! slot as a `JoinHandle` resource with that one wait.
//!
//! - **Holds** (a task owns the resource or some of its permits): task id,
//!   the `acquired_at` site, since when, and a *generation*, a number taken
//!   once per hold and never reused (`resource::next_generation`). An
//!   exclusive hold (a `Mutex`, an `RwLock` writer) lives in the resource's
//!   `HoldSlot`: a few atomic words that only the holder writes, read
//!   like a sequence lock whose sequence is the generation (0: no holder).
//!   Acquiring stores them with plain stores, releasing stores one zero:
//!   no lock and no read-modify-write on the uncontended path. Shared holds
//!   (`RwLock` readers, `Semaphore` permits) take one of the resource's
//!   four `SharedSlot`s, hold slots that a holder claims with one
//!   compare-and-swap and frees with one store (the resource's only
//!   read-modify-write on the uncontended shared path), and past four at
//!   once, a list under the resource's own small lock. That lock, which
//!   also guards the waits, is `std`'s mutex, not a spin lock,
//!   although a spin lock's release (a plain store, where the mutex swaps
//!   to find sleepers) would save a contended wait two atomic
//!   read-modify-writes: under `SCHED_FIFO`, a thread that spins and
//!   yields for a lock whose lower-priority holder was preempted on the
//!   same CPU never lets that holder run, and the process hangs.
//! - **Waits** (a task's acquire future is queued): task id, the
//!   `waiting_at` site, what it asks (exclusive, shared, `n` permits, or
//!   the end of a task), since when, and a generation. A wait is recorded
//!   when the acquire future's first poll returns `Pending` (it is then in
//!   tokio's queue) and removed when it ends: acquired, or the future
//!   dropped (`select!`, `abort`, a timeout). Waits are kept in queue order
//!   under the resource's lock, which also counts every change of the
//!   resource's lists (its *version*). A wait also keeps the await site
//!   its waiter's frame was at when it polled the acquire future or the
//!   `JoinHandle` (a wait polled by another task or at another `.await`
//!   moves there; a `JoinHandle` records a new one): readers count it
//!   only while one of the waiter's shown frames is suspended at that
//!   `.await`, under the same frames each at the same `.await` (the
//!   frame's *ancestry*, see `task::stack::ancestry`), so a future or a
//!   traced fn raced in `select!` and kept while the task went on is no
//!   wait of the task's (a lock's still queues the waiters behind it).
//!   The double
//!   collect below keeps that true at the instant it reports: a member is
//!   idle and not woken between the passes, so its stack did not move. A resource is listed in the
//!   `Registry` at its first wait, and stays listed until its *owner* (the
//!   wrapper) is dropped, or until its last wait ends
//!   if that comes later: the registry is locked twice in a resource's
//!   life, not twice per wait (the slow path). A listed resource with no
//!   wait shows nothing: every reader goes by its list of waits. The
//!   readers' fast paths are two loads while nothing is listed and no
//!   join wait ever started, and one load to skip each listed resource
//!   whose list of waits is empty.
//!
//! Debuggers read the same records from memory alone: the registry keeps
//! the listed resources' addresses in slots of a never-freed page table
//! (one slot per live resource that ever had a wait, reused once it is
//! unlisted),
//! and each resource the pointers and lengths of its lists, rewritten
//! under its lock after each change (see `resource.rs` and the debug
//! descriptor). The uncontended exclusive path writes nothing more.
//!
//! Writers record a hold after the tokio acquire succeeded, and release it
//! *before* handing the resource back (exclusive holds) or *after* (shared
//! holds, whose release hands permits to the next waiter and wakes it
//! first), so that a waiter that has been handed the resource is always
//! seen either holding it or woken.
//!
//! The task of a record is the traced root being polled
//! ([`current_task_id`]). Code outside any traced root is recorded as task
//! `0`, the unknown task: it never waits in a reported deadlock, and a task
//! that waits for it is never reported either, since it could let it go.
//!
//! # Reading: the double collect
//!
//! `detect` never blocks a task for longer than a copy of one resource's
//! lists. It copies every listed resource and every join slot in use
//! (pass 1), computes the candidate deadlocks, then copies the resources
//! of every candidate again (pass 2) and keeps a candidate only if each of
//! its resources is unchanged (same version, same exclusive generation,
//! each shared slot's generation and claim count the same; for a join
//! slot, the same generation, which no other wait ever takes) and each
//! member task is idle and has not been woken since pass 1. Generations
//! and versions only grow, so every record of a kept candidate existed at
//! every instant between its two reads: at the instant between the
//! passes, the whole deadlock existed.
//!
//! [`current_task_id`]: crate::task::record::layout::current_task_id

pub(crate) mod detect;
pub(crate) mod join;
pub(crate) mod join_wait;
pub(crate) mod query;
pub(crate) mod report;
pub(crate) mod resource;
mod slot;
#[cfg(not(async_stack_loom))]
pub(crate) mod tasks;
pub(crate) mod waiter;

#[cfg(all(test, async_stack_loom))]
mod loom_models;
#[cfg(all(test, not(async_stack_loom)))]
mod tests;
