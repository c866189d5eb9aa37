//! The return address of async frames (`BacktraceFrame::address`): for
//! every async frame but the root it is non-zero, and symbolising it with
//! the `backtrace` crate (which looks up `address - 1`) yields, among its
//! possibly inlined symbols, this file at the line of the parent's `.await`,
//! the way `__builtin_return_address(0)` symbolises to the call site. The
//! root has no parent and reports 0.

mod common;

use std::future::Future;
use std::pin::{Pin, pin};

use async_stack::{Backtrace, BacktraceFrame, traced_async};

use common::{PollOnce, yield_once};

/// `(file, line, function)` of every symbol at `address` (innermost inlined
/// first).
fn symbols(address: usize) -> Vec<(Option<std::path::PathBuf>, Option<u32>, String)> {
    let mut out = Vec::new();
    backtrace::resolve(address as *mut std::ffi::c_void, |symbol| {
        out.push((
            symbol
                .filename()
                .map(|f| common::normalize(&f.display().to_string())),
            symbol.lineno(),
            symbol
                .name()
                .map_or_else(|| "<unknown>".to_owned(), |n| format!("{n:#}")),
        ));
    });
    out
}

/// Asserts that `frame`'s return address symbolises to `line` of this file.
#[track_caller]
fn assert_returns_to(frame: &BacktraceFrame, line: u32, bt: &Backtrace) {
    let address = frame.address();
    assert_ne!(
        address,
        0,
        "no return address for {:?} in\n{bt}",
        frame.function()
    );
    let found = symbols(address);
    let this_file = common::normalize(file!());
    assert!(
        found
            .iter()
            .any(|(file, l, _)| file.as_ref() == Some(&this_file) && *l == Some(line)),
        "return address {address:#x} of {:?} should symbolise to {}:{line}, got {found:#?}\nin\n{bt}",
        frame.function(),
        file!(),
    );
}

/// Asserts the async frames of `bt` are `functions` (innermost first) and
/// that each but the root returns to the `.await` line of the next one.
#[track_caller]
fn check(bt: &Backtrace, functions: &[&str], await_lines: &[u32]) {
    let frames: Vec<&BacktraceFrame> = bt.async_frames().collect();
    let names: Vec<&str> = frames
        .iter()
        .map(|f| f.function().unwrap_or("<none>"))
        .collect();
    assert_eq!(names, functions, "{bt}");
    assert_eq!(await_lines.len(), frames.len() - 1);
    for (frame, &line) in frames.iter().zip(await_lines) {
        assert_returns_to(frame, line, bt);
    }
    let root = frames.last().unwrap();
    assert_eq!(root.address(), 0, "the root has no parent\n{bt}");
}

#[traced_async]
async fn leaf() -> Backtrace {
    yield_once().await;
    async_stack::backtrace()
}

#[traced_async]
async fn middle() -> (Backtrace, Vec<u32>) {
    let (bt, line) = (leaf().await, line!());
    (bt, vec![line])
}

#[traced_async]
async fn upper() -> (Backtrace, Vec<u32>) {
    yield_once().await;
    let ((bt, mut lines), line) = (middle().await, line!());
    lines.push(line);
    (bt, lines)
}

#[traced_async]
async fn root() -> (Backtrace, Vec<u32>) {
    let ((bt, mut lines), line) = (upper().await, line!());
    lines.push(line);
    (bt, lines)
}

const CHAIN: [&str; 4] = [
    "frame_return_address::leaf",
    "frame_return_address::middle",
    "frame_return_address::upper",
    "frame_return_address::root",
];

#[test]
fn each_frame_returns_to_its_parents_await() {
    let (bt, lines) = futures::executor::block_on(root());
    check(&bt, &CHAIN, &lines);
}

#[test]
fn cached_addresses_are_stable_across_captures_and_threads() {
    // The first capture resolves (and caches) the addresses; later ones,
    // also from other threads, copy them.
    let (first, lines) = futures::executor::block_on(root());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (second, _) = rt.block_on(rt.spawn(root())).unwrap();
    check(&first, &CHAIN, &lines);
    check(&second, &CHAIN, &lines);
    let addresses = |bt: &Backtrace| {
        bt.async_frames()
            .map(BacktraceFrame::address)
            .collect::<Vec<_>>()
    };
    assert_eq!(addresses(&first), addresses(&second));
}

// --- One child, two parents: the address follows the parent --------------

#[traced_async]
async fn polled_twice(out: &mut Vec<Backtrace>) {
    out.push(async_stack::backtrace());
    yield_once().await;
    out.push(async_stack::backtrace());
}

#[traced_async]
async fn first_parent<F: Future<Output = ()>>(c: Pin<&mut F>) -> u32 {
    let (poll, line) = (PollOnce(c).await, line!());
    assert!(poll.is_pending());
    line
}

#[traced_async]
async fn second_parent<F: Future<Output = ()>>(c: Pin<&mut F>) -> u32 {
    let ((), line) = (c.await, line!());
    line
}

#[traced_async]
async fn two_parents() -> (Vec<Backtrace>, [u32; 4]) {
    let mut captures = Vec::new();
    let lines = {
        let mut c = pin!(polled_twice(&mut captures));
        let (first, first_root) = (first_parent(c.as_mut()).await, line!());
        let (second, second_root) = (second_parent(c.as_mut()).await, line!());
        [first, first_root, second, second_root]
    };
    (captures, lines)
}

#[test]
fn address_follows_the_parent_of_each_poll() {
    let (captures, [first, first_root, second, second_root]) =
        futures::executor::block_on(two_parents());
    let [a, b] = &captures[..] else {
        panic!("two captures expected");
    };
    let child = "frame_return_address::polled_twice";
    let root = "frame_return_address::two_parents";
    check(
        a,
        &[child, "frame_return_address::first_parent", root],
        &[first, first_root],
    );
    check(
        b,
        &[child, "frame_return_address::second_parent", root],
        &[second, second_root],
    );
}

// --- join! ----------------------------------------------------------------

#[traced_async]
async fn joined() -> ((Backtrace, Backtrace), u32) {
    let (out, line) = (futures::join!(leaf(), leaf()), line!());
    (out, line)
}

#[traced_async]
async fn join_root() -> (((Backtrace, Backtrace), u32), u32) {
    let (out, line) = (joined().await, line!());
    (out, line)
}

#[test]
fn join_branches_return_to_the_join_line() {
    let ((((a, b), join_line), root_line), _) = common::block_on(join_root());
    let chain = [
        "frame_return_address::leaf",
        "frame_return_address::joined",
        "frame_return_address::join_root",
    ];
    check(&a, &chain, &[join_line, root_line]);
    check(&b, &chain, &[join_line, root_line]);
}

// --- A nested executor after a completed `.await` -------------------------

#[traced_async]
async fn nested_root() -> (Backtrace, u32) {
    let (bt, line) = (leaf().await, line!());
    (bt, line)
}

#[traced_async]
async fn blocking() -> ((Backtrace, u32), Vec<u32>) {
    // A traced child through another `.await`, which completes (and
    // caches that `.await`'s return address) before `block_on` runs.
    let _ = middle().await;
    let (inner, line) = (futures::executor::block_on(nested_root()), line!());
    (inner, vec![line])
}

#[traced_async]
async fn blocking_root() -> ((Backtrace, u32), Vec<u32>) {
    let ((inner, mut lines), line) = (blocking().await, line!());
    lines.push(line);
    (inner, lines)
}

#[test]
fn nested_executor_root_returns_to_the_block_on_call() {
    // `nested_root` is polled from `blocking`'s `block_on` call, not from
    // the `.await` of `middle()` that completed just before it.
    let (((bt, nested_line), lines), _) = common::block_on(blocking_root());
    let [block_line, root_line] = lines[..] else {
        unreachable!()
    };
    check(
        &bt,
        &[
            "frame_return_address::leaf",
            "frame_return_address::nested_root",
            "frame_return_address::blocking",
            "frame_return_address::blocking_root",
        ],
        &[nested_line, block_line, root_line],
    );
}

// --- The per-site cache is not poisoned by code between awaits ------------

/// The `.await` on `line` first awaits an untraced future (no child polled,
/// nothing cached), then, once that completed, a nested executor polls a
/// traced root from the next line; the next time round the same `.await`
/// polls a traced child, whose address must return to that `.await`.
#[traced_async]
async fn reused_site() -> (Backtrace, u32) {
    let mut round = 0;
    loop {
        let next = if round == 0 {
            futures::future::Either::Left(async {
                yield_once().await;
                None
            })
        } else {
            futures::future::Either::Right(async { Some(leaf().await) })
        };
        let (bt, line) = (next.await, line!());
        if let Some(bt) = bt {
            return (bt, line);
        }
        let _ = futures::executor::block_on(nested_root());
        round += 1;
    }
}

#[traced_async]
async fn reused_site_root() -> ((Backtrace, u32), u32) {
    let (out, line) = (reused_site().await, line!());
    (out, line)
}

#[test]
fn code_between_awaits_does_not_poison_the_address_of_an_await() {
    let (((bt, site_line), root_line), _) = common::block_on(reused_site_root());
    check(
        &bt,
        &[
            "frame_return_address::leaf",
            "frame_return_address::reused_site",
            "frame_return_address::reused_site_root",
        ],
        &[site_line, root_line],
    );
}
