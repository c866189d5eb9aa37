// `.await` in every kind of position still type-checks and evaluates as
// before: postfix chains, operators, `?`, conditions, scrutinees, let-else,
// temporaries borrowed across the await, nested async blocks and closures
// (left alone), awaiting macros as statements and as tail expressions,
// struct literals awaited directly or through a method (the rewritten
// `match` scrutinee needs parentheses there, and only there).
#![deny(warnings)]

use std::future::{IntoFuture, ready};
use std::sync::Mutex;

use async_stack::traced_async;

#[traced_async]
async fn value(n: u32) -> u32 {
    n
}

#[traced_async]
async fn parse(s: &str) -> Result<u32, std::num::ParseIntError> {
    s.parse()
}

struct Lazy(u32);

impl IntoFuture for Lazy {
    type Output = u32;
    type IntoFuture = std::future::Ready<u32>;
    fn into_future(self) -> Self::IntoFuture {
        ready(self.0)
    }
}

#[traced_async]
async fn postfix_and_operators() -> Result<String, std::num::ParseIntError> {
    let a = parse("1").await? + value(2).await * 3;
    value(0).await.to_string();
    let text = value(a).await.to_string();
    let lazy = Lazy(4).await;
    let negated = -(value(5).await as i64);
    let borrowed = ready(&text).await.len();
    Ok(format!("{a} {text} {lazy} {negated} {borrowed}"))
}

#[traced_async]
async fn control_flow(n: u32) -> u32 {
    let mut total = 0;
    if value(n).await > 1 {
        total += 1;
    }
    match value(n).await {
        0 => total += 10,
        _ => total += 100,
    }
    while value(total).await < 1000 {
        total *= 2;
    }
    let Some(x) = Some(value(n).await) else {
        return 0;
    };
    for i in [value(1).await, value(2).await] {
        total += i;
    }
    total + x
}

struct Named {
    n: u32,
}

impl IntoFuture for Named {
    type Output = u32;
    type IntoFuture = std::future::Ready<u32>;
    fn into_future(self) -> Self::IntoFuture {
        ready(self.n)
    }
}

#[traced_async]
async fn struct_literals() -> u32 {
    let a = Named { n: 1 }.await;
    let b = Named { n: 2 }.into_future().await;
    let c = ready(Named { n: 3 }.n).await;
    a + b + c + Lazy(4).await
}

#[traced_async]
async fn temporaries(lock: &Mutex<u32>) -> u32 {
    // The guard is a temporary of the awaited expression, as with a plain
    // `.await` it lives until the end of the statement.
    let n = ready(*lock.lock().unwrap()).await;
    n + 1
}

#[traced_async]
async fn nested_futures() -> u32 {
    let block = async { value(1).await + value(2).await }.await;
    let closure = |n: u32| async move { value(n).await };
    let from_closure = closure(3).await;
    let sync_closure = (|| 4)();
    fn nested_item() -> u32 {
        5
    }
    block + from_closure + sync_closure + nested_item()
}

macro_rules! await_twice {
    ($e:expr) => {
        $e.await + $e.await
    };
}

#[traced_async]
async fn macros() -> (u32, u32) {
    let (a, b) = futures::join!(value(1), value(2));
    let c = await_twice!(value(3));
    futures::future::ready(()).await;
    tokio::select! {
        biased;
        _ = value(0) => {}
    }
    println!("{}", value(0).await);
    let tried = tokio::try_join!(parse("1"), parse("2")).map(|(x, y)| x + y);
    assert_eq!(tried, Ok(3));
    futures::join!(value(a), value(b + c))
}

#[traced_async]
async fn tail_macro() -> (u32, u32) {
    tokio::join!(value(1), value(2))
}

#[traced_async]
async fn tail_statement_macro() {
    tokio::select! {
        _ = value(1) => {}
    }
}

fn main() {
    futures::executor::block_on(async {
        assert_eq!(postfix_and_operators().await.unwrap(), "7 7 4 -5 1");
        assert_eq!(control_flow(3).await, 1622);
        assert_eq!(temporaries(&Mutex::new(1)).await, 2);
        assert_eq!(nested_futures().await, 15);
        assert_eq!(tail_macro().await, (1, 2));
        assert_eq!(struct_literals().await, 10);
    });
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            assert_eq!(macros().await, (1, 8));
            tail_statement_macro().await;
        });
}
