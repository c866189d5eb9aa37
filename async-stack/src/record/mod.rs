//! Recording: what an instrumented future writes on every poll.
//!
//! - [`frame`]: the [`AsyncStackFrame`](frame::AsyncStackFrame) each traced
//!   future carries;
//! - [`site`]: the static call-site and await-site records, and their
//!   interned ids;
//! - [`current`]: the thread's current frame and task (the only
//!   thread-local state);
//! - [`clock`]: the coarse clock that stamps task states;
//! - [`traced`]: [`Traced`](traced::Traced), the poll protocol that drives
//!   all of the above and the task records of [`crate::task`].

pub(crate) mod clock;
pub(crate) mod current;
pub(crate) mod frame;
pub(crate) mod site;
#[cfg(not(async_stack_loom))]
pub(crate) mod threads;
pub(crate) mod traced;
