//! `ASYNC_STACK_WAKES` turns wake recording on for a whole run. Each case
//! runs the `wake_env` helper in a process of its own, since the variable
//! is read once per process (at the first task registration).
#![cfg(unix)]

use std::ffi::OsStr;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_wake_env");

/// Runs the helper with `ASYNC_STACK_WAKES` set to `value` (unset for
/// `None`); returns stdout and stderr.
fn run(value: Option<&OsStr>) -> (String, String) {
    common::run_with_env(BIN, "ASYNC_STACK_WAKES", value)
}

const OFF: &str = "recording: false\ntasks: 0\nsender woke listener: 0\n";
/// The sender's message wakes the listener; the channel closing as the
/// sender ends finds it already woken (its waker was taken), so once.
const ON: &str = "recording: true\ntasks: 2\nsender woke listener: 1\n";

#[test]
fn recording_is_off_unless_asked_for() {
    for value in [None, Some("0"), Some("false"), Some("off"), Some("")] {
        let (stdout, stderr) = run(value.map(OsStr::new));
        assert_eq!(stdout, OFF, "{value:?}");
        assert_eq!(stderr, "", "{value:?}");
    }
}

#[test]
fn one_turns_recording_on() {
    for value in ["1", "true", "ON", " yes "] {
        let (stdout, stderr) = run(Some(OsStr::new(value)));
        assert_eq!(stdout, ON, "{value:?}");
        assert_eq!(stderr, "", "{value:?}");
    }
}

#[test]
fn an_unknown_value_is_reported_once_and_recording_stays_off() {
    let (stdout, stderr) = run(Some(OsStr::new("2")));
    assert_eq!(stdout, OFF);
    assert_eq!(
        stderr,
        "async-stack: ASYNC_STACK_WAKES=\"2\" is not understood (use 1 or 0); wake recording stays off\n"
    );
    use std::os::unix::ffi::OsStrExt;
    let (stdout, stderr) = run(Some(OsStr::from_bytes(b"o\xffn")));
    assert_eq!(stdout, OFF);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is not understood"), "{stderr}");
}
