//! Reporting: the places a dump or backtrace is printed without being
//! asked for, on a panic, a signal or a stall.

pub mod panic;
#[cfg(unix)]
pub mod signal;
pub mod stall;
