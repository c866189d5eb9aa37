//! `ASYNC_STACK_CLOCK` selects how task states are stamped: the ticking
//! clock thread (default, `ticker`) or the system clock (`system`). Each
//! case runs the `clock_mode` helper in a process of its own, since the
//! variable is read once per process.
#![cfg(target_os = "linux")]

use std::ffi::OsStr;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_clock_mode");

/// Runs the helper with `ASYNC_STACK_CLOCK` set to `value` (unset for
/// `None`); returns stdout and stderr.
fn run(value: Option<&OsStr>) -> (String, String) {
    common::run_with_env(BIN, "ASYNC_STACK_CLOCK", value)
}

#[test]
fn the_ticker_runs_by_default_and_on_request() {
    for value in [None, Some(OsStr::new("ticker")), Some(OsStr::new("TICKER"))] {
        let (stdout, stderr) = run(value);
        assert_eq!(stdout, "ticker: yes\nstate: idle\n", "{value:?}");
        assert_eq!(stderr, "", "{value:?}");
    }
}

#[test]
fn system_starts_no_thread_and_still_stamps_states() {
    for value in ["system", "System"] {
        let (stdout, stderr) = run(Some(OsStr::new(value)));
        assert_eq!(stdout, "ticker: no\nstate: idle\n", "{value}");
        assert_eq!(stderr, "", "{value}");
    }
}

#[test]
fn an_unknown_value_is_reported_once_and_the_default_used() {
    let (stdout, stderr) = run(Some(OsStr::new("fast")));
    assert_eq!(stdout, "ticker: yes\nstate: idle\n");
    assert_eq!(
        stderr,
        "async-stack: ASYNC_STACK_CLOCK=\"fast\" is neither `ticker` nor `system`; using `ticker`\n"
    );
    use std::os::unix::ffi::OsStrExt;
    let (stdout, stderr) = run(Some(OsStr::from_bytes(b"sys\xfftem")));
    assert_eq!(stdout, "ticker: yes\nstate: idle\n");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("neither `ticker` nor `system`"), "{stderr}");
}
