//! Helpers shared by the `walker_*` and `frame_*` tests: a description of
//! an async frame that compares exactly (function, file, line, running), a
//! check of the spliced layout of a capture, a future that yields once,
//! a minimal thread-park executor, a runner of the helper binaries
//! that read an environment variable once per process, the check of a
//! dump's JSON against the checked-in schema, a bounded wait for what
//! another thread does ([`wait_for`]), and, for the deadlock tests, the
//! running task's id and a wait for a given deadlock ([`deadlock_of`]).
//!
//! Every test file that uses this module declares `mod common;`; each uses a
//! different subset of it, hence the `dead_code` allowance.

#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use async_stack::{Backtrace, BacktraceFrame, FrameKind};

/// One async frame as a user sees it, reduced to what the tests pin down
/// exactly: its function, the file and line it shows, and whether it is the
/// running (innermost) frame or suspended at an `.await`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub function: String,
    pub file: PathBuf,
    pub line: u32,
    pub running: bool,
}

/// The innermost async frame, running at `file:line` (the line of the
/// `backtrace()` call, or of the call that leads to it).
pub fn running(function: &str, file: &str, line: u32) -> Seen {
    Seen {
        function: function.to_owned(),
        file: normalize(file),
        line,
        running: true,
    }
}

/// An async frame suspended on the `.await` at `file:line`.
pub fn awaiting(function: &str, file: &str, line: u32) -> Seen {
    Seen {
        function: function.to_owned(),
        file: normalize(file),
        line,
        running: false,
    }
}

/// A frame's file as an absolute, canonical path.
///
/// Await sites carry `file!()`, which is relative to the workspace root
/// (where cargo runs rustc); debug info carries absolute paths. Both name
/// the same file, and the tests compare files, not spellings.
pub fn normalize(file: &str) -> PathBuf {
    let path = Path::new(file);
    let absolute = if path.is_relative() {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the tests package sits in the workspace")
            .join(path)
    } else {
        path.to_path_buf()
    };
    absolute.canonicalize().unwrap_or(absolute)
}

fn seen(frame: &BacktraceFrame) -> Seen {
    Seen {
        function: frame.function().unwrap_or("<none>").to_owned(),
        file: normalize(frame.file().unwrap_or("<none>")),
        line: frame.line().unwrap_or(0),
        running: frame.is_running(),
    }
}

/// The async frames of `bt`, innermost first.
pub fn async_frames(bt: &Backtrace) -> Vec<Seen> {
    bt.async_frames().map(seen).collect()
}

/// Asserts that the async frames of `bt` are exactly `expected` (innermost
/// first), that [`Backtrace::async_depth`] agrees, and that the default view
/// is spliced as documented: `natives_inside` native frames (the synchronous
/// code inside the innermost poll), then the async frames in one run, then
/// only native frames (the executor, at least one).
#[track_caller]
pub fn assert_stack(bt: &Backtrace, natives_inside: usize, expected: &[Seen]) {
    assert_eq!(async_frames(bt), expected, "async frames of\n{bt}");
    assert_eq!(bt.async_depth(), expected.len(), "async_depth of\n{bt}");
    let kinds: Vec<FrameKind> = bt.frames().iter().map(BacktraceFrame::kind).collect();
    let layout = runs(&kinds);
    let mut want = Vec::new();
    if natives_inside > 0 {
        want.push((FrameKind::Native, natives_inside));
    }
    want.push((FrameKind::Async, expected.len()));
    let executor = layout.get(want.len()).copied();
    assert!(
        matches!(executor, Some((FrameKind::Native, n)) if n > 0),
        "no executor frames below the root in\n{bt}"
    );
    want.extend(executor);
    assert_eq!(layout, want, "layout (kind, run length) of\n{bt}");
}

/// Run-length encoding of frame kinds.
fn runs(kinds: &[FrameKind]) -> Vec<(FrameKind, usize)> {
    let mut out: Vec<(FrameKind, usize)> = Vec::new();
    for &kind in kinds {
        match out.last_mut() {
            Some((last, n)) if *last == kind => *n += 1,
            _ => out.push((kind, 1)),
        }
    }
    out
}

/// Asserts that `bt` was taken outside any traced poll: no async frame.
#[track_caller]
pub fn assert_no_async_frames(bt: &Backtrace) {
    assert_eq!(bt.async_depth(), 0, "async_depth of\n{bt}");
    assert_eq!(async_frames(bt), [], "async frames of\n{bt}");
    assert!(
        bt.frames().iter().all(|f| f.kind() == FrameKind::Native),
        "{bt}"
    );
}

/// A future that returns `Pending` once (waking itself first), then
/// `Ready`. Works on any executor.
#[derive(Debug, Default)]
pub struct YieldOnce {
    yielded: bool,
}

/// Suspends the calling future once.
pub fn yield_once() -> YieldOnce {
    YieldOnce::default()
}

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// A future that polls `inner` exactly once and returns what that poll
/// returned, so a parent can poll a child without awaiting it to the end.
#[derive(Debug)]
pub struct PollOnce<'a, F>(pub Pin<&'a mut F>);

impl<F: Future> Future for PollOnce<'_, F> {
    type Output = Poll<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(self.0.as_mut().poll(cx))
    }
}

struct ParkWaker(Thread);

impl Wake for ParkWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A minimal executor: polls `fut` on this thread, parking between polls
/// until a wake. Returns the output and the line of the `poll` call, which
/// is where the executor's native frame sits below the task root.
#[inline(never)]
pub fn block_on<F: Future>(fut: F) -> (F::Output, u32) {
    let mut fut = pin!(fut);
    let waker = Waker::from(Arc::new(ParkWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        let (poll, line) = (fut.as_mut().poll(&mut cx), line!());
        if let Poll::Ready(out) = poll {
            return (out, line);
        }
        thread::park();
    }
}

/// This file, for frames of the executor above.
pub const FILE: &str = file!();

/// The 1-based line of the test source `file` (relative to the `tests`
/// package) whose text ends with the comment `// {marker}`.
pub fn marker_line(file: &str, marker: &str) -> u32 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let src = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let needle = format!("// {marker}");
    src.lines()
        .position(|l| l.trim_end().ends_with(&needle))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("no {needle} in {file}"))
}

/// Runs the helper binary `bin` with the environment variable `var` set to
/// `value` (removed for `None`), and returns its stdout and stderr; the run
/// must succeed. For the tests of variables read once per process.
pub fn run_with_env(bin: &str, var: &str, value: Option<&std::ffi::OsStr>) -> (String, String) {
    let mut cmd = std::process::Command::new(bin);
    match value {
        Some(v) => cmd.env(var, v),
        None => cmd.env_remove(var),
    };
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// What is wrong with `json` against the checked-in dump schema
/// (`docs/task-dump.schema.json`); empty when it is valid.
pub fn dump_schema_errors(json: &str) -> Vec<String> {
    let schema_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/task-dump.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let value: serde_json::Value = serde_json::from_str(json).expect("JSON");
    jsonschema::validator_for(&schema)
        .expect("a valid schema")
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect()
}

/// Upper bound for waiting on another thread; never a timing assertion.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Blocks the calling thread until `done` holds, checking every
/// millisecond; fails the test with `what` after [`PATIENCE`] (another
/// thread that gets no turn for seconds on a loaded machine is normal,
/// one that never does its part is the failure).
#[track_caller]
pub fn wait_for(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "{what}: not in {PATIENCE:?}");
        thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The id of the traced task the caller runs in.
#[track_caller]
pub fn task_id() -> u64 {
    async_stack::current_task_id().expect("inside a traced task")
}

/// The deadlock whose tasks are exactly `tasks` (in any order), once every
/// one of them has run into it: the runtime gets up to 1,000 turns until
/// then.
pub async fn deadlock_of(tasks: &[u64]) -> async_stack::Deadlock {
    let mut tasks = tasks.to_vec();
    tasks.sort_unstable();
    for _ in 0..1000 {
        if let Some(d) = async_stack::deadlocks()
            .into_iter()
            .find(|d| d.tasks() == tasks)
        {
            return d;
        }
        tokio::task::yield_now().await;
    }
    panic!("no deadlock among {tasks:?}");
}
