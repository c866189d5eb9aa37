//! [`Profile`]: samples aggregated by interned stack, within a memory
//! budget.
//!
//! # Model
//!
//! - **Strings**, **modules** (a binary or shared library: path and build
//!   id), **frames** and **stacks** are interned tables; a stack is a list
//!   of frame ids, root first.
//! - An **entry** is one (group, task, state, stack) with its [`Weights`]:
//!   sample count, wall time and CPU time. Its group is the task's name,
//!   or its spawn site (see [`Grouping`]).
//! - Async frames are stored as text (function, file, line, column), and
//!   native frames as module and offset in it, so that a profile saved by
//!   one process symbolises in another while the binary is at hand.
//!
//! # Memory budget
//!
//! The profile counts the bytes its tables take (hash-map overhead
//! included, as an estimate). When an insertion takes it over its budget,
//! it sheds detail until it is back under three quarters of it:
//!
//! 1. entries are folded, lowest weight first, into one entry per group
//!    and state whose stack is the synthetic frame `[cleared]`, so that
//!    per-group and total weights stay exact ([`Stats::cleared_stacks`]);
//!    (a stack that other entries still use stays, so many tasks on one
//!    stack fold until enough entries are gone);
//! 2. only when every entry is folded and that is not enough, whole
//!    groups are dropped, lowest weight first, and their weights are
//!    counted in [`Stats::dropped_groups`] and [`Stats::dropped`].
//!
//! # Files
//!
//! - `stats.rs`: weights, sample states, grouping, and the run's counters;
//! - `interning.rs`: the interned tables and the entries;
//! - `model.rs`: the profile, adding samples, and reading stacks back;
//! - `budget.rs`: counting bytes and shedding detail.

mod budget;
pub(crate) mod interning;
pub(crate) mod model;
pub(crate) mod stats;
#[cfg(test)]
mod tests;

pub(crate) use interning::{Entry, EntryKey, Frame, Interner, Module};
// Only on-CPU samples (Linux, not under loom) and tests add a task by text.
#[cfg_attr(any(async_stack_loom, not(target_os = "linux")), allow(unused_imports))]
pub(crate) use interning::SampledTask;
pub use model::{DEFAULT_BUDGET, FrameRef, MAX_BUDGET, MIN_BUDGET, Profile, StackSample};
pub use stats::{Grouping, SampleState, Stats, Weights};
