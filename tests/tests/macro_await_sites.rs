//! Which `.await` a suspended `#[traced_async]` frame is attributed to.
//!
//! Each test captures a backtrace inside a traced leaf and checks the async
//! frames above it against `(function, line, column)` recorded next to the
//! awaits with `line!()` and the source text: the frame of a suspended
//! function reports the `.await` it is suspended at, an `async {}` block or
//! async closure is attributed to the outer `.await` of that block, and an
//! awaiting macro to the macro's name.

use async_stack::{Backtrace, FrameKind, traced_async};
use futures::executor::block_on;

/// `(function, file, line, column)` of the async frames, innermost first.
fn async_frames(bt: &Backtrace) -> Vec<(String, String, u32, u32)> {
    bt.frames()
        .iter()
        .filter(|frame| frame.kind() == FrameKind::Async)
        .map(|frame| {
            (
                frame.function().unwrap_or("<none>").to_owned(),
                frame.file().unwrap_or("<none>").to_owned(),
                frame.line().unwrap_or(0),
                frame.column().unwrap_or(0),
            )
        })
        .collect()
}

/// The suspended frame (second innermost) of a capture made in [`capture`].
fn suspended_at(bt: &Backtrace) -> (String, u32, u32) {
    let frames = async_frames(bt);
    assert_eq!(
        frames.len(),
        2,
        "expected `capture` and its caller: {frames:#?}"
    );
    assert_eq!(frames[0].0, "macro_await_sites::capture");
    let (function, file, line, column) = frames[1].clone();
    assert_eq!(file, file!());
    (function, line, column)
}

/// The 1-based column of `needle` on `line` of this file.
fn column_of(line: u32, needle: &str) -> u32 {
    let text = include_str!("macro_await_sites.rs");
    let source_line = text.lines().nth(line as usize - 1).unwrap();
    let index = source_line
        .find(needle)
        .unwrap_or_else(|| panic!("no {needle:?} on line {line}: {source_line}"));
    u32::try_from(index).unwrap() + 1
}

#[traced_async]
async fn capture() -> Backtrace {
    async_stack::backtrace()
}

#[traced_async]
async fn plain_await() -> (Backtrace, u32) {
    let (bt, line) = (capture().await, line!());
    (bt, line)
}

#[test]
fn suspended_frame_reports_its_await() {
    let (bt, line) = block_on(plain_await());
    let expected = (
        "macro_await_sites::plain_await".to_owned(),
        line,
        column_of(line, "await"),
    );
    assert_eq!(suspended_at(&bt), expected);
}

#[traced_async]
async fn two_awaits() -> (Backtrace, u32, Backtrace, u32) {
    let (first, first_line) = (capture().await, line!());
    let (second, second_line) = (capture().await, line!());
    (first, first_line, second, second_line)
}

#[test]
fn each_await_updates_the_site() {
    let (first, first_line, second, second_line) = block_on(two_awaits());
    assert_eq!(suspended_at(&first).1, first_line);
    assert_eq!(suspended_at(&second).1, second_line);
}

#[traced_async]
async fn nested_block() -> (Backtrace, u32, u32) {
    let (block, inner_line) = (async { capture().await }, line!());
    let (bt, outer_line) = (block.await, line!());
    (bt, inner_line, outer_line)
}

#[test]
fn nested_async_block_is_attributed_to_its_outer_await() {
    let (bt, inner_line, outer_line) = block_on(nested_block());
    assert_ne!(inner_line, outer_line);
    let expected = (
        "macro_await_sites::nested_block".to_owned(),
        outer_line,
        column_of(outer_line, "await"),
    );
    assert_eq!(suspended_at(&bt), expected);
}

#[traced_async]
async fn async_closure() -> (Backtrace, u32) {
    let call = async |n: u32| {
        let bt = capture().await;
        (bt, n)
    };
    let ((bt, _), line) = (call(1).await, line!());
    (bt, line)
}

#[test]
fn async_closure_is_attributed_to_its_outer_await() {
    let (bt, line) = block_on(async_closure());
    assert_eq!(suspended_at(&bt).1, line);
}

#[traced_async]
async fn join_macro() -> (Backtrace, u32) {
    let ((bt, ()), line) = (futures::join!(capture(), async {}), line!());
    (bt, line)
}

#[test]
fn join_is_attributed_to_the_macro_name() {
    let (bt, line) = block_on(join_macro());
    let expected = (
        "macro_await_sites::join_macro".to_owned(),
        line,
        column_of(line, "join!"),
    );
    assert_eq!(suspended_at(&bt), expected);
}

#[traced_async]
async fn select_statement() -> (Backtrace, u32) {
    let mut captured = Vec::new();
    let line = line!() + 1;
    futures::select_biased! {
        bt = futures::FutureExt::fuse(capture()) => captured.push(bt),
    }
    (captured.pop().unwrap(), line)
}

#[test]
fn statement_macro_is_attributed_to_the_macro_name() {
    let (bt, line) = block_on(select_statement());
    let expected = (
        "macro_await_sites::select_statement".to_owned(),
        line,
        column_of(line, "select_biased!"),
    );
    assert_eq!(suspended_at(&bt), expected);
}

macro_rules! identity {
    ($e:expr) => {
        $e
    };
}

#[traced_async]
async fn macro_with_await() -> (Backtrace, u32) {
    let (bt, line) = (identity!(capture().await), line!());
    (bt, line)
}

#[test]
fn macro_containing_await_is_attributed_to_the_macro_name() {
    let (bt, line) = block_on(macro_with_await());
    assert_eq!(suspended_at(&bt).1, line);
    assert_eq!(suspended_at(&bt).2, column_of(line, "identity!"));
}

#[traced_async(name = "custom name")]
async fn renamed() -> (Backtrace, u32) {
    let (bt, line) = (capture().await, line!());
    (bt, line)
}

#[traced_async]
async fn r#match() -> Backtrace {
    capture().await
}

struct Service;

impl Service {
    #[traced_async]
    async fn method(&self) -> (Backtrace, u32) {
        let (bt, line) = (capture().await, line!());
        (bt, line)
    }
}

#[async_trait::async_trait]
trait Handler {
    async fn handle(&self) -> (Backtrace, u32);
}

#[async_trait::async_trait]
impl Handler for Service {
    #[traced_async]
    async fn handle(&self) -> (Backtrace, u32) {
        let (bt, line) = (capture().await, line!());
        (bt, line)
    }
}

#[test]
fn frame_names() {
    let (bt, line) = block_on(renamed());
    assert_eq!(
        suspended_at(&bt),
        ("custom name".to_owned(), line, column_of(line, "await"))
    );
    let bt = block_on(r#match());
    assert_eq!(suspended_at(&bt).0, "macro_await_sites::match");
    let (bt, line) = block_on(Service.method());
    assert_eq!(
        suspended_at(&bt),
        (
            // Qualified with the impl's type, as a sync backtrace reads.
            "macro_await_sites::Service::method".to_owned(),
            line,
            column_of(line, "await")
        )
    );
}

struct Wrapper<T>(T);

impl<T: Sync> Wrapper<T> {
    #[traced_async]
    async fn generic(&self) -> (Backtrace, u32) {
        let (bt, line) = (capture().await, line!());
        (bt, line)
    }
}

trait Native {
    async fn native(&self) -> (Backtrace, u32);
}

impl Native for Service {
    #[traced_async]
    async fn native(&self) -> (Backtrace, u32) {
        let (bt, line) = (capture().await, line!());
        (bt, line)
    }
}

// Another attribute below: the fn stays an `async fn` around its body.
#[traced_async]
#[rustfmt::skip]
async fn kept_async() -> (Backtrace, u32) {
    let (bt, line) = (capture().await, line!());
    (bt, line)
}

#[test]
fn methods_are_named_with_their_type_in_every_form() {
    let cases = [
        (
            block_on(Wrapper(1u8).generic()),
            // `type_name`'s spelling: generic arguments are not known.
            "macro_await_sites::Wrapper<_>::generic",
        ),
        (
            block_on(Service.native()),
            "<macro_await_sites::Service as macro_await_sites::Native>::native",
        ),
        (block_on(kept_async()), "macro_await_sites::kept_async"),
    ];
    for ((bt, line), name) in cases {
        assert_eq!(
            suspended_at(&bt),
            (name.to_owned(), line, column_of(line, "await"))
        );
    }
}

#[test]
fn async_trait_method_reports_its_await() {
    let (bt, line) = block_on(Service.handle());
    let expected = (
        "<macro_await_sites::Service as macro_await_sites::Handler>::handle".to_owned(),
        line,
        column_of(line, "await"),
    );
    assert_eq!(suspended_at(&bt), expected);
}
