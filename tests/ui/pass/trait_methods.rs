// Native `async fn` in traits: trait impls, default methods, generic impls,
// and an impl of a `-> impl Future + Send` trait method.
#![deny(warnings)]

use std::future::Future;

use async_stack::traced_async;

trait Store {
    async fn get(&self, key: u32) -> Option<u32>;

    #[traced_async]
    async fn get_or(&self, key: u32, default: u32) -> u32 {
        self.get(key).await.unwrap_or(default)
    }
}

trait SendStore {
    fn fetch(&self) -> impl Future<Output = u32> + Send;
}

struct Db;

impl Store for Db {
    #[traced_async]
    async fn get(&self, key: u32) -> Option<u32> {
        (key < 10).then_some(key * 10)
    }
}

impl SendStore for Db {
    #[traced_async]
    async fn fetch(&self) -> u32 {
        self.get(1).await.unwrap_or(0)
    }
}

struct Wrapper<T>(T);

impl<T> Wrapper<T>
where
    T: Store + Sync,
{
    #[traced_async]
    async fn doubled(&self, key: u32) -> u32 {
        self.0.get_or(key, 0).await * 2
    }
}

fn main() {
    futures::executor::block_on(async {
        assert_eq!(Db.get(2).await, Some(20));
        assert_eq!(Db.get_or(20, 7).await, 7);
        assert_eq!(Db.fetch().await, 10);
        assert_eq!(Wrapper(Db).doubled(3).await, 60);
    });
}
