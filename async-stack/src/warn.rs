//! Warnings to standard error that can never panic.
//!
//! `eprintln!` panics when writing fails (a closed pipe gives `EPIPE`), and
//! a library must not bring a program down for a warning nobody can read.
//! Every warning of the library goes through [`warn`]: bad values of
//! `ASYNC_STACK_MAX_TASKS` (when the registry is created) and of
//! `ASYNC_STACK_CLOCK` (when the clock starts, inside a task's first poll).
//! Reports a user asked for (panic, signal and stall reports) write to
//! their own sinks and ignore errors there too.

use std::io::Write;

/// Writes one line to standard error, ignoring any error.
#[cfg_attr(async_stack_loom, allow(dead_code))]
pub(crate) fn warn(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args);
    let _ = err.write_all(b"\n");
}
