//! Recording: what an instrumented future writes on every poll.
//!
//! - [`frame`]: the [`AsyncStackFrame`](frame::AsyncStackFrame) each traced
//!   future carries;
//! - [`site`]: the static call-site and await-site records, and their
//!   interned ids;
//! - [`current`]: the thread's current frame and task (the only
//!   thread-local state);
//! - [`threads`]: the list of threads that poll tasks, for readers that
//!   cannot reach a thread-local;
//! - [`location`]: a source location as readers show it.
//!
//! This layer knows nothing of tasks: the poll protocol that drives it
//! ([`crate::task::traced`]) sits in the task layer above.

pub(crate) mod current;
pub(crate) mod frame;
pub mod location;
pub(crate) mod site;
#[cfg(not(async_stack_loom))]
pub(crate) mod threads;
