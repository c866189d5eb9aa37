// `#[traced_async]` on a trait impl and on a trait definition (native
// `async fn` in traits): every `async fn` with a body is a frame named as
// with the attribute on it (a default method as `Trait::method`); a method
// without a body is left alone.
#![deny(warnings)]

use std::future::Future;

use async_stack::traced_async;

#[path = "common/frames.rs"]
mod frames;

use frames::frames;

/// `<Db as Store>::method` in this crate.
fn db_store(method: &str) -> String {
    let krate = module_path!();
    format!("<{krate}::Db as {krate}::Store>::{method}")
}

#[traced_async]
trait Store {
    type Key;

    async fn get(&self, key: u32) -> (u32, Vec<String>);

    async fn get_twice(&self, key: u32) -> (u32, Vec<String>) {
        let (value, frames) = self.get(key).await;
        (value * 2, frames)
    }
}

trait SendStore {
    fn fetch(&self) -> impl Future<Output = Vec<String>> + Send;
}

struct Db;

#[traced_async]
impl Store for Db {
    type Key = u32;

    async fn get(&self, key: u32) -> (u32, Vec<String>) {
        (key * 10, frames())
    }
}

#[traced_async]
impl SendStore for Db {
    async fn fetch(&self) -> Vec<String> {
        frames()
    }
}

fn assert_send<T: Send>(_: &T) {}

fn main() {
    futures::executor::block_on(async {
        assert_eq!(Db.get(2).await, (20, vec![db_store("get")]));
        assert_eq!(
            Db.get_twice(2).await,
            (
                40,
                vec![
                    db_store("get"),
                    format!("{}::Store::get_twice", module_path!())
                ]
            )
        );
        let fetch = Db.fetch();
        assert_send(&fetch);
        let krate = module_path!();
        assert_eq!(
            fetch.await,
            [format!("<{krate}::Db as {krate}::SendStore>::fetch")]
        );
    });
}
