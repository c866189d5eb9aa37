// A traced future is `Send` when the plain one would be: Send data held
// across `.await`s, generic and `impl Trait` arguments, `&self` methods.
#![deny(warnings)]

use std::sync::Arc;

use async_stack::traced_async;

fn assert_send<T: Send>(_: &T) {}

#[traced_async]
async fn holds_across_await(data: Arc<Vec<u32>>) -> usize {
    let local = String::from("held");
    tokio::task::yield_now().await;
    leaf().await;
    local.len() + data.len()
}

#[traced_async]
async fn leaf() {}

#[traced_async]
async fn generic<T: Send + Sync>(value: T, extra: impl Send) -> T {
    leaf().await;
    drop(extra);
    value
}

struct Service {
    name: String,
}

impl Service {
    #[traced_async]
    async fn handle(&self) -> usize {
        leaf().await;
        self.name.len()
    }
}

#[tokio::main]
async fn main() {
    let future = holds_across_await(Arc::new(vec![1, 2]));
    assert_send(&future);
    // Spawning requires `Send + 'static`.
    assert_eq!(tokio::spawn(future).await.unwrap(), 6);

    let future = generic(5u32, "extra");
    assert_send(&future);
    assert_eq!(future.await, 5);

    let service = Service { name: "svc".into() };
    let future = service.handle();
    assert_send(&future);
    assert_eq!(future.await, 3);
}
