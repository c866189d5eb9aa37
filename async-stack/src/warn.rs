//! Warnings to standard error that can never panic.
//!
//! `eprintln!` panics when writing fails (a closed pipe gives `EPIPE`), and
//! a library must not bring a program down for a warning nobody can read.

use std::io::Write;

/// Writes one line to standard error, ignoring any error.
#[cfg_attr(async_stack_loom, allow(dead_code))]
pub(crate) fn warn(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args);
    let _ = err.write_all(b"\n");
}
