// `#[traced_async]` goes above `#[tokio::main]`, which then turns the
// instrumented `async fn main` into a sync one.
#![deny(warnings)]

use async_stack::traced_async;

#[traced_async]
async fn answer() -> u32 {
    42
}

#[traced_async]
#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(answer().await, 42);
}
