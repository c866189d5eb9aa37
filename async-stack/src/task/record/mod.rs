//! The **task record**: everything another thread may read about one task,
//! in two cache lines that are never freed.
//!
//! A record is 128 bytes, aligned to a cache line, so that two tasks polled
//! on two threads never write the same line. The first line holds what a
//! task root writes on every poll and what its waker touches; the second
//! holds what the task was spawned with and the task's published stack
//! (see [`crate::task::stack`]), whose first three slots live inline, so
//! that the usual short stack costs no more memory. Deeper stacks take
//! chunks from a pool that is never freed either
//! ([`crate::task::registry`]). A task's name, which few tasks have, is in
//! its extension ([`TaskExt`]).
//!
//! # Layout and who writes what
//!
//! | offset | field | written by |
//! |---:|---|---|
//! | 0 | `id`: the task's id, `0` while no task lives here | the registering thread, then the thread that ends the task |
//! | 8 | `state`: running / idle / scheduled, since when, and the wake count the last poll started from (see [`state`]) | the polling thread (plain stores) |
//! | 16 | `polls` | the polling thread |
//! | 24 | `wakes`: wakes from outside the task's poll, and the time of the first one since the last poll started | wakers, by compare-and-swap |
//! | 32 | `current`: the frame being polled right now, its slot in the top bits (see [`crate::record::current`]) | the polling thread, on every entry and exit of a frame |
//! | 40 | `waker_data`, 48 `waker_vtable`: the executor's waker, forwarded to by the task's own waker (its data pointer, and its vtable as an id in [`vtables`]; or a boxed waker, see [`vtables::BOXED`]) | the registering thread, while no waker refers to the record |
//! | 52 | `refs`: one for the live task, one per waker of it, exact up to [`refs::MAX`](layout::refs::MAX) (see [`layout::refs`]) | wakers (read-modify-write) |
//! | 56 | `self_wakes`: wakes from inside the task's own polls | the polling thread |
//! | 64 | `parent`: the id of the task that spawned this one, `0` if unknown | the registering thread |
//! | 72 | `spawn`: where the task was spawned, and whether it has a name or a fallback waker (see [`spawn`]) | the registering thread; the polling thread when it makes a fallback waker |
//! | 76 | `seq`, 80 `foreign`, 88 `meta`, 96 `births`, 100 `chunk`, 104 `slots` | the published stack's (see [`crate::task::stack`]) |
//!
//! # Incarnations and recycling
//!
//! A record holds one task at a time. Each task it holds is an
//! *incarnation*, numbered from 1 in the `foreign` word; frames name their
//! place by record index and incarnation, so a frame that outlives its task
//! can never touch the next task's stack. A record whose incarnation
//! counter is exhausted is retired, never handed out again, so numbers are
//! never reused. A record returns to the free list only when its task has
//! ended *and* the last waker that refers to it is dropped (`refs` reaches
//! zero): a waker therefore always refers to the task it was made for. A
//! count that would pass [`refs::MAX`](layout::refs::MAX) (only forgotten
//! wakers get there) sticks instead of wrapping, and the record is then
//! never recycled.
//!
//! # The executor's waker
//!
//! The record keeps the waker of the executor that first polled its task,
//! which the task's own waker forwards every wake to, whatever executors
//! the process runs: in 12 bytes (data pointer and interned vtable id)
//! when its vtable is one of the first [`vtables::MAX`] the process saw,
//! and otherwise whole, in a box allocated once per task. So a clone of
//! the task's waker, made at any poll, reaches that executor.
//!
//! # Reading a record
//!
//! [`TaskRecord::read`] copies a record as one instant: the id, the state
//! word, the poll count, the published stack and the running frame, taken
//! between two loads of the stack's sequence counter, of the `foreign` word,
//! of `polls` and of `state`, and retried when any of them moved. The poll
//! count is the version: a task's poll starts by writing `state`, then
//! `polls`, and only then `current`, and ends by clearing `current` before
//! writing `state` (with fences in between); readers load `polls` before
//! `state`. So a copy never pairs an idle task with a running frame, even
//! when two polls in a row end in the same idle word (same millisecond, no
//! wake), which the state alone cannot tell apart.
//!
//! # Files
//!
//! - `layout.rs`: the struct, its packed words, and the writes of the
//!   polling thread and of wakers;
//! - `vtables.rs`: the interned vtables of executors' wakers, and the
//!   record's waker cell;
//! - `read.rs`: the read protocol (one instant of a record);
//! - `names.rs`: task names and extensions.

pub(crate) mod layout;
pub(crate) mod names;
pub(crate) mod read;
pub(crate) mod vtables;

#[cfg_attr(async_stack_loom, allow(unused_imports))]
pub(crate) use layout::{TaskRecord, spawn, state, wakes};
#[cfg_attr(async_stack_loom, allow(unused_imports))]
pub(crate) use names::{TaskExt, TaskName};
pub(crate) use read::RawTask;
