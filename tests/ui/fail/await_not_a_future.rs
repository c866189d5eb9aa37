// A type error in a rewritten `.await` points at the user's `.await`.
use async_stack::traced_async;

#[traced_async]
async fn fetch() -> u32 {
    let n = 1u32;
    n.await
}

fn main() {}
