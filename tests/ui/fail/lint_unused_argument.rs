// Lints on arguments still point at the arguments.
#![deny(unused_variables, unused_mut)]

use async_stack::traced_async;

#[traced_async]
async fn fetch(id: u32, mut retries: u32, _ignored: u32) {}

fn main() {}
