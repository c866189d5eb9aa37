//! `go tool pprof`, for the tests that check Go's reader opens what
//! async-stack writes (`sampler_export`, `http_go_pprof`).
//!
//! Needs Go (`scripts/test.sh` installs `golang-go`). Under CI (`CI` set) a
//! missing `go` fails the test; elsewhere the test says so and passes. The
//! `go` command runs offline, with its caches in the test's folder.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// Whether `go` runs: `false` (after saying so) when it is missing outside
/// CI; a panic when it is missing under CI.
pub fn have_go() -> bool {
    let found = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "`go` is not installed: run scripts/test.sh, which installs golang-go"
        );
        eprintln!("`go` is not installed, not running `go tool pprof`");
    }
    found
}

/// The standard output of `go tool pprof ARGS`, which must succeed, with
/// its caches under `dir`.
#[track_caller]
pub fn pprof(dir: &Path, args: &[&str]) -> String {
    let cache = dir.join("go");
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", cache.join("cache"))
        .env("GOPATH", cache.join("path"))
        .env("HOME", &cache)
        .env("PPROF_TMPDIR", &cache)
        .env_remove("PPROF_BINARY_PATH")
        .output()
        .expect("run go tool pprof");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "go tool pprof {args:?} failed: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stdout
}
