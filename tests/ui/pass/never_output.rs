//! A traced fn whose future never completes (`-> !`): the await rewrite
//! must not trip `unreachable_code` after a diverging `.await`.
#![deny(warnings)]
use async_stack::traced_async;
#[traced_async]
async fn forever() -> ! { loop { futures::pending!() } }
#[traced_async]
async fn caller() -> ! { forever().await }
fn main() { let _ = caller(); }
