//! Runtime behaviour of `#[traced_async]` expansions: instrumented functions
//! return what the plain ones return, evaluate each awaited expression once,
//! and drop arguments and locals in the same order.
//!
//! This file is also linted by `cargo clippy --all-targets -D warnings`, so
//! the forms below double as a check that the expansion raises no lint in
//! user code.

use std::cell::RefCell;
use std::future::ready;
use std::pin::Pin;

use async_stack::traced_async;
use futures::executor::block_on;

#[traced_async]
async fn parse_sum(a: &str, b: &str) -> Result<u32, std::num::ParseIntError> {
    let a: u32 = ready(a).await.parse()?;
    if a == 0 {
        return Ok(0);
    }
    Ok(a + ready(b).await.parse::<u32>()?)
}

#[traced_async]
async fn shown(n: u32) -> impl std::fmt::Display {
    ready(n).await * 2
}

#[traced_async]
async fn joined() -> (u32, u32) {
    let (a, b) = futures::join!(ready(1), ready(2));
    let c = async { ready(a).await + ready(b).await }.await;
    tokio::select! {
        biased;
        d = ready(c) => (c, d),
    }
}

#[test]
fn forms_return_the_values_of_the_plain_fn() {
    assert_eq!(block_on(parse_sum("1", "2")), Ok(3));
    assert_eq!(block_on(parse_sum("0", "x")), Ok(0));
    assert!(block_on(parse_sum("1", "x")).is_err());
    assert_eq!(block_on(shown(21)).to_string(), "42");
    assert_eq!(block_on(joined()), (3, 3));
}

struct Counter(u32);

impl Counter {
    #[traced_async]
    async fn bump(&mut self) -> u32 {
        self.0 += 1;
        self.0
    }

    #[traced_async]
    async fn pinned_bump(mut self: Pin<&mut Self>) -> u32 {
        self.as_mut().get_mut().bump().await
    }
}

#[traced_async]
async fn bump_twice(counter: &mut Counter) -> u32 {
    counter.bump().await;
    Pin::new(counter).pinned_bump().await
}

#[test]
fn each_awaited_expression_is_evaluated_once() {
    let mut counter = Counter(0);
    assert_eq!(block_on(bump_twice(&mut counter)), 2);
    assert_eq!(counter.0, 2);
}

thread_local! {
    static DROPS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

struct Noisy(&'static str);

impl Drop for Noisy {
    fn drop(&mut self) {
        DROPS.with(|drops| drops.borrow_mut().push(self.0));
    }
}

fn take_drops() -> Vec<&'static str> {
    DROPS.with(RefCell::take)
}

async fn plain(first: Noisy, _unused: Noisy, last: Noisy) {
    let _local = Noisy("local");
    ready(()).await;
    let _ = (&first, &last);
}

#[traced_async]
async fn traced(first: Noisy, _unused: Noisy, last: Noisy) {
    let _local = Noisy("local");
    ready(()).await;
    let _ = (&first, &last);
}

#[test]
fn drop_order_matches_the_plain_fn() {
    let expected = ["local", "last", "unused", "first"];
    block_on(plain(Noisy("first"), Noisy("unused"), Noisy("last")));
    assert_eq!(take_drops(), expected);
    block_on(traced(Noisy("first"), Noisy("unused"), Noisy("last")));
    assert_eq!(take_drops(), expected);
}

#[traced_async]
#[tokio::test]
async fn runs_under_tokio_test_as_one_frame() {
    assert_eq!(async_stack::backtrace().async_depth(), 1);
    assert_eq!(ready(5).await, 5);
}
