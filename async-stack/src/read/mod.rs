//! Reading: everything that turns the recorded frames and task records
//! into something a person reads.
//!
//! - [`walker`]: the current thread's native backtrace with the async
//!   frames spliced in;
//! - [`symbolize`]: the walker's process-wide cache of resolved addresses;
//! - [`native`]: native addresses as (module, build id, offset), and the
//!   ELF symboliser the sampler names its frames with; the walker asks its
//!   symbol table for the names line-tables-only debug info leaves short;
//! - [`verify`]: the live chain checked against the published stack, for
//!   the walker and the sampler both;
//! - [`sites`]: site ids resolved to their static call and await sites;
//! - [`plumbing`]: which native symbols are this crate's poll machinery;
//! - [`dump`]: every live task, read from another thread without blocking.

pub mod dump;
pub(crate) mod native;
pub(crate) mod plumbing;
pub(crate) mod sites;
pub(crate) mod symbolize;
pub(crate) mod verify;
pub(crate) mod walker;
