use async_stack::traced_async;

#[inline(never)]
fn sync_leaf() -> async_stack::Backtrace {
    async_stack::backtrace()
}

#[traced_async]
async fn leaf() -> async_stack::Backtrace {
    tokio::task::yield_now().await;
    sync_leaf()
}

#[traced_async]
async fn mid() -> async_stack::Backtrace {
    leaf().await
}

#[traced_async]
async fn top() -> async_stack::Backtrace {
    let (a, _) = futures::join!(mid(), async { 1 });
    a
}

#[tokio::main]
async fn main() {
    let bt = tokio::spawn(top()).await.unwrap();
    println!("{bt}");
    println!("----- full");
    println!("{bt:#}");
}
