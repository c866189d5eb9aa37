//! `#[traced_async]` on fns that a `macro_rules!` writes or is handed:
//! the attribute and the fn's tokens then come from different macro
//! contexts. Each form compiles, returns what the plain `async fn`
//! returns, drops its arguments in the plain fn's order (run to completion,
//! and dropped before its first poll), and is one frame named after the
//! fn.
//!
//! The three ways a macro brings them together:
//! - [`traced_items!`] puts `#[traced_async]` on the items it is handed
//!   (the attribute is the macro's, the fn the caller's);
//! - [`case_with!`] writes the fn and is handed its attributes as tokens
//!   (the attribute is the caller's, the fn the macro's);
//! - the same, with `#[tracing::instrument]` below ours, so that the fn
//!   stays an `async fn` around the traced body.
//!
//! Before the expansion resolved its own names where the attribute is, the
//! first two failed to compile: "cannot find value `first`" (the moved
//! argument) and "cannot find value `__ret`" (the return-type check).
//!
//! This file is also linted by `cargo clippy --all-targets -D warnings`:
//! the expansion raises no lint in these forms either.

use std::cell::RefCell;
use std::future::{Future, ready};

use async_stack::{Backtrace, traced_async};
use futures::executor::block_on;

thread_local! {
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn log(line: String) {
    LOG.with(|l| l.borrow_mut().push(line));
}

fn take_log() -> Vec<String> {
    LOG.with(RefCell::take)
}

/// Logs its drop.
#[derive(Debug)]
pub struct Loud(&'static str);

impl Drop for Loud {
    fn drop(&mut self) {
        log(format!("drop {}", self.0));
    }
}

/// Puts `#[traced_async]` on every item it is handed.
macro_rules! traced_items {
    ($($item:item)*) => {
        $(#[traced_async] $item)*
    };
}

/// Writes `case` (the same fn as [`plain::case`]) under the attributes it
/// is handed.
macro_rules! case_with {
    ($($attr:tt)*) => {
        use super::*;

        $($attr)*
        pub async fn case(
            first: Loud,
            _unused: Loud,
            mut count: u32,
            _: Loud,
            (pair, _rest): (Loud, Loud),
        ) -> (u32, Backtrace) {
            count += 1;
            ready(()).await;
            log(format!("body {} {} {count}", first.0, pair.0));
            (count, async_stack::backtrace())
        }
    };
}

mod plain {
    case_with!();
}

mod handed_the_attribute {
    case_with!(#[traced_async]);
}

mod handed_two_attributes {
    case_with!(#[traced_async] #[tracing::instrument(skip_all)]);
}

mod handed_the_fn {
    use super::*;

    traced_items! {
        pub async fn case(
            first: Loud,
            _unused: Loud,
            mut count: u32,
            _: Loud,
            (pair, _rest): (Loud, Loud),
        ) -> (u32, Backtrace) {
            count += 1;
            ready(()).await;
            log(format!("body {} {} {count}", first.0, pair.0));
            (count, async_stack::backtrace())
        }
    }

    #[derive(Debug)]
    pub struct Service(pub Loud);

    traced_items! {
        impl Service {
            /// `self` unused by the body: still moved into the future.
            pub async fn finish(self, _reason: Loud) -> u32 {
                ready(7).await
            }

            pub async fn peek(&self, extra: u32) -> u32 {
                log(format!("peek {}", (self.0).0));
                ready(extra).await
            }
        }
    }
}

type Case<F> = fn(Loud, Loud, u32, Loud, (Loud, Loud)) -> F;

fn arguments() -> (Loud, Loud, u32, Loud, (Loud, Loud)) {
    (
        Loud("first"),
        Loud("unused"),
        1,
        Loud("wild"),
        (Loud("pair"), Loud("rest")),
    )
}

/// What `case` logs run to completion, and dropped before its first poll;
/// and the async frames' names its backtrace shows.
fn run<F: Future<Output = (u32, Backtrace)>>(
    case: Case<F>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (a, b, c, d, e) = arguments();
    let (count, bt) = block_on(case(a, b, c, d, e));
    assert_eq!(count, 2);
    log("returned".to_owned());
    let completed = take_log();
    let (a, b, c, d, e) = arguments();
    let future = case(a, b, c, d, e);
    log("made".to_owned());
    drop(future);
    let dropped = take_log();
    let names = bt
        .async_frames()
        .map(|f| f.function().unwrap_or("<none>").to_owned())
        .collect();
    (completed, dropped, names)
}

#[test]
fn traced_fns_written_by_macros_behave_as_the_plain_fn() {
    let (completed, dropped, names) = run(plain::case);
    assert_eq!(
        completed,
        [
            "body first pair 2",
            "drop rest",
            "drop pair",
            "drop wild",
            "drop unused",
            "drop first",
            "returned"
        ]
    );
    assert_eq!(
        dropped,
        [
            "made",
            "drop first",
            "drop unused",
            "drop wild",
            "drop pair",
            "drop rest"
        ]
    );
    assert!(names.is_empty(), "{names:?}");
    let traced = [
        run(handed_the_attribute::case),
        run(handed_two_attributes::case),
        run(handed_the_fn::case),
    ];
    let modules = [
        "handed_the_attribute",
        "handed_two_attributes",
        "handed_the_fn",
    ];
    for ((c, d, names), module) in traced.into_iter().zip(modules) {
        assert_eq!(c, completed, "{module}");
        assert_eq!(d, dropped, "{module}");
        assert_eq!(names, [format!("macro_hygiene::{module}::case")]);
    }
}

/// `handed_the_fn::Service`'s `finish`, plain.
#[derive(Debug)]
struct PlainService {
    _held: Loud,
}

impl PlainService {
    async fn finish(self, _reason: Loud) -> u32 {
        ready(7).await
    }
}

#[test]
fn methods_of_a_block_handed_to_a_macro_keep_self_to_the_end() {
    use handed_the_fn::Service;

    let future = PlainService {
        _held: Loud("service"),
    }
    .finish(Loud("reason"));
    log("made".to_owned());
    assert_eq!(block_on(future), 7);
    let plain = take_log();
    assert_eq!(plain, ["made", "drop reason", "drop service"]);

    let service = Service(Loud("service"));
    assert_eq!(block_on(service.peek(3)), 3);
    assert_eq!(take_log(), ["peek service"]);
    let future = service.finish(Loud("reason"));
    log("made".to_owned());
    assert_eq!(block_on(future), 7);
    assert_eq!(take_log(), plain);
}
