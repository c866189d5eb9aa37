// `#[tokio::main]` expands first and leaves a sync `fn main`.
use async_stack::traced_async;

#[tokio::main]
#[traced_async]
async fn main() {}
