//! Reading: everything that turns the recorded frames and task records
//! into something a person reads.
//!
//! - [`walker`]: the current thread's native backtrace with the async
//!   frames spliced in;
//! - [`symbolize`]: the process-wide cache of resolved addresses;
//! - [`dump`]: every live task, read from another thread without blocking.

pub mod dump;
pub(crate) mod symbolize;
pub(crate) mod walker;
