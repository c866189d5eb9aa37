//! Runs every example as `cargo run --example NAME` does, from the
//! workspace root, and checks what a user reads: the exit status and the
//! lines that do not depend on timing (frames, `.await` lines, the
//! deadlock report, files written). The README's first command is
//! `cargo run --example tour`, so a tour that panics, hangs or prints
//! wrong lines fails here.
//!
//! The binaries are the ones `cargo test` builds beside this test (it
//! builds a package's examples before running its tests); run this test
//! through `cargo test -p examples` or `cargo test --workspace`.
//!
//! Line and column numbers below are those of `examples/examples/*.rs`:
//! moving code there means updating them here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Longer than any example takes on a loaded 2-core machine (the slowest
/// takes about 5 s).
const PATIENCE: Duration = Duration::from_secs(120);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("examples/ has a parent")
        .to_path_buf()
}

/// The example binary `name` that cargo built for this test run.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/run_examples-<hash> -> target/<profile>/examples/
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps")
        .join("examples");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run this test with `cargo test -p examples` (without --test), which builds the examples first",
        path.display()
    );
    path
}

/// Runs example `name` with `args` from the workspace root, as `cargo run`
/// from there would, killing it after [`PATIENCE`].
fn run(name: &str, args: &[&str]) -> Output {
    let mut child = Command::new(example(name))
        .args(args)
        .current_dir(workspace_root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the example starts");
    let start = Instant::now();
    loop {
        if child
            .try_wait()
            .expect("the example can be waited for")
            .is_some()
        {
            return child.wait_with_output().expect("its output");
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let out = child.wait_with_output().expect("its output");
            panic!(
                "example {name} {args:?} still ran after {PATIENCE:?}:\n{}",
                text(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stdout, then stderr.
fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that `out` succeeded and has each of `lines` as a whole line.
fn assert_lines(name: &str, out: &Output, lines: &[&str]) {
    let all = text(out);
    assert!(out.status.success(), "{name}: {}\n{all}", out.status);
    let have: Vec<&str> = all.lines().collect();
    for line in lines {
        assert!(
            have.contains(line),
            "{name}: no line {line:?} in its output:\n{all}"
        );
    }
}

/// Asserts that some line of `out` passes `is` (a line whose figures
/// depend on timing), saying `what` it should show otherwise.
fn assert_some_line(out: &Output, what: &str, is: impl Fn(&str) -> bool) {
    let all = text(out);
    assert!(all.lines().any(is), "{what}:\n{all}");
}

#[test]
fn tour() {
    let out = run("tour", &[]);
    assert_lines(
        "tour",
        &out,
        &[
            "== 1. A backtrace captured inside fetch_row ==",
            "   0: [async] tour::storage::fetch_row",
            "             at examples/examples/tour.rs:31:22",
            "   1: [async] tour::service::load_orders",
            "             awaiting at examples/examples/tour.rs:93:47",
            "   2: [async] tour::handle_request",
            "             awaiting at examples/examples/tour.rs:113:36",
            "request 1 -> Ok(\"profiles#1: 1 orders\")",
            "== 2. Every live task, while requests wait for the replica ==",
            "      tour::storage::wait_for_replica [async]",
            "          awaiting at examples/examples/tour.rs:42:28",
            "    tour::service::load_orders [async]",
            "        awaiting at examples/examples/tour.rs:95:39",
            "  spawned at examples/examples/tour.rs:136:13",
            "== The same dump, identical stacks coalesced ({:#}) ==",
            "request 2 -> Ok(\"profiles#2: 1 orders\")",
            "request 3 -> Ok(\"profiles#3: 1 orders\")",
            "request 4 -> Ok(\"profiles#4: 1 orders\")",
            "== 3. Who woke whom (async_stack::wake), tasks folded by name ==",
        ],
    );
    assert_some_line(
        &out,
        "the three requests waiting for the replica are one coalesced group",
        |l| {
            l.starts_with("3 tasks [idle ")
                && l.contains("\"request-2\"")
                && l.contains("\"request-3\"")
                && l.contains("\"request-4\"")
        },
    );
}

#[test]
fn stuck() {
    let out = run("stuck", &[]);
    assert_lines(
        "stuck",
        &out,
        &[
            "== sending SIGUSR1 to ourselves ==",
            "async-stack: task dump on signal 10",
            "  stuck::transfer [async]",
            "      awaiting at examples/examples/stuck.rs:25:27",
            "  stuck::checksum [async]",
            "      running",
            "  spawned at examples/examples/stuck.rs:65:5",
        ],
    );
    assert_some_line(
        &out,
        "the watchdog reports the task that does not yield",
        |l| {
            l.starts_with("async-stack: stall: task ")
                && l.contains(" has been running without yielding for ")
        },
    );
}

#[test]
fn deadlock() {
    let out = run("deadlock", &[]);
    assert_lines(
        "deadlock",
        &out,
        &[
            "deadlock: 2 tasks wait for each other",
            "task 1 \"alice to bob\" waits at examples/examples/deadlock.rs:24:25 for Mutex created at examples/examples/deadlock.rs:32:24, held by task 2 (acquired at examples/examples/deadlock.rs:20:27)",
            "task 2 \"bob to alice\" waits at examples/examples/deadlock.rs:24:25 for Mutex created at examples/examples/deadlock.rs:31:26, held by task 1 (acquired at examples/examples/deadlock.rs:20:27)",
            "  deadlock::transfer [async]",
            "      awaiting at examples/examples/deadlock.rs:24:32",
            "after aborting the first transfer: alice 101, bob 99, deadlocks: 0",
        ],
    );
}

#[test]
fn profile() {
    let out = run("profile", &[]);
    assert_lines(
        "profile",
        &out,
        &[
            "  mismatches  0",
            "wrote target/profile:",
            "  target/profile/profile.pb.gz",
            "  target/profile/profile.folded",
            "  target/profile/profile.json",
            "  target/profile/profile.asprof",
        ],
    );
    // A copy that races with its task's thread 64 times is dropped and
    // counted, never kept: how many depends on how the OS schedules the
    // two threads (a task's thread preempted inside a section of its
    // published stack tears every copy until it runs again), so the test
    // checks the accounting, not a count: every stack attempted was read
    // or dropped as torn, and none was half-written.
    let all = text(&out);
    let number = |line: &str, prefix: &str| -> Option<u64> {
        line.strip_prefix(prefix)?
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let (mut ok, mut attempted, mut torn) = (None, None, None);
    for line in all.lines() {
        if let Some(n) = number(line, "  ok          ") {
            ok = Some(n);
            attempted = line.split(" of ").nth(1).and_then(|rest| number(rest, ""));
        }
        if let Some(n) = number(line, "  dropped     ") {
            torn = Some(n);
            assert!(
                line.contains(" torn, 0 inconsistent,"),
                "no half-written stack: {line}\n{all}"
            );
        }
    }
    let (ok, attempted, torn) = (ok.unwrap(), attempted.unwrap(), torn.unwrap());
    assert_eq!(ok + torn, attempted, "every stack read or dropped:\n{all}");
    assert!(ok > 0, "{all}");
    for file in [
        "profile.pb.gz",
        "profile.folded",
        "profile.json",
        "profile.asprof",
    ] {
        let path = workspace_root().join("target/profile").join(file);
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{} is missing or empty", path.display());
    }
}

#[test]
fn endpoint_once() {
    let out = run("endpoint", &["--once"]);
    assert_lines(
        "endpoint",
        &out,
        &[
            "  endpoint::refresh_cache [async]",
            "      awaiting at examples/examples/endpoint.rs:52:52",
            "  spawned at examples/examples/endpoint.rs:84:10",
            "    endpoint::db_read [async]",
            "        awaiting at examples/examples/endpoint.rs:27:53",
            "  endpoint::load_order [async]",
            "      awaiting at examples/examples/endpoint.rs:41:29",
            "order 7: 3 items",
            "order 8: 3 items",
        ],
    );
}

/// `wakes` records a program and writes a workload; `replay` replays it.
#[test]
fn wakes_then_replay() {
    let out = run("wakes", &[]);
    assert_lines(
        "wakes",
        &out,
        &[
            "wrote target/wakes/graph.json",
            "wrote target/wakes/graph.dot",
            "wrote target/wakes/reduction.json",
            "wrote target/wakes/workload.json",
            "replay it with: cargo run --example replay -- target/wakes/workload.json",
        ],
    );
    let out = run(
        "replay",
        &["target/wakes/workload.json", "--duration-ms", "500"],
    );
    assert_lines(
        "replay",
        &out,
        &[
            "replaying target/wakes/workload.json (3 groups, 1 independent, 10 tasks) for 0.50s",
            "wake graph of the replay, reduced:",
        ],
    );
    // The time it took: at least what was asked, later under load (the
    // last cycles finish), so not a fixed line.
    let all = text(&out);
    let took = all
        .lines()
        .find_map(|l| l.strip_prefix("replayed ")?.strip_suffix("s, 10 tasks"))
        .unwrap_or_else(|| panic!("replay: no line \"replayed <secs>s, 10 tasks\":\n{all}"));
    let took: f64 = took.parse().expect("seconds");
    assert!(took >= 0.5, "replay: replayed {took}s of 0.50s:\n{all}");
}

#[test]
fn replay_reports_bad_arguments_and_files() {
    let out = run("replay", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "replay: no workload file\nusage: replay <workload.json> [--duration-ms N]\n"
    );
    let out = run("replay", &["examples/workloads/no-such-file.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("replay: cannot open examples/workloads/no-such-file.json: "),
        "{}",
        text(&out)
    );
    let out = run(
        "replay",
        &["examples/workloads/pairs.json", "--duration-ms", "x"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
