//! A warning the library writes to stderr must not bring the program down
//! when nobody can read it. `eprintln!` panics on a failed write, and a
//! pipe whose reader is gone fails every write with `EPIPE` (Rust ignores
//! `SIGPIPE`), so the library writes its warnings through one function that
//! ignores errors.
#![cfg(unix)]

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_warn_probe");

/// The helper, with both variables set to values the library warns about.
fn probe() -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env("ASYNC_STACK_MAX_TASKS", "lots")
        .env("ASYNC_STACK_CLOCK", "fast")
        .stdout(Stdio::piped());
    cmd
}

const STDOUT: &str = "pending: true\nstate: idle\n";

#[test]
fn the_probe_warns_twice_on_a_readable_stderr() {
    let out = probe().stderr(Stdio::piped()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), STDOUT);
    let max = async_stack::task::MAX_TASKS;
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "async-stack: ASYNC_STACK_MAX_TASKS=\"lots\" is not a number of tasks from 1 to \
             {max}; using {max}\n\
             async-stack: ASYNC_STACK_CLOCK=\"fast\" is neither `ticker` nor `system`; using \
             `ticker`\n"
        )
    );
}

#[test]
fn warnings_to_a_stderr_nobody_reads_do_not_panic() {
    // A pipe whose read end is closed before the child starts: every write
    // to it fails, whenever the child makes it.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = probe().stderr(writer).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), STDOUT);
}
