// `#[async_trait]` on the impl or trait, `#[traced_async]` on the method:
// async-trait expands first, and the boxed future it makes is instrumented.
#![deny(warnings)]

use async_stack::traced_async;
use async_trait::async_trait;

#[async_trait]
trait Store {
    async fn get(&self, key: &str) -> Option<String>;

    #[traced_async]
    async fn get_or(&self, key: &str, default: &str) -> String {
        self.get(key).await.unwrap_or_else(|| default.to_owned())
    }
}

struct Db;

#[async_trait]
impl Store for Db {
    #[traced_async]
    async fn get(&self, key: &str) -> Option<String> {
        let value = std::future::ready(key.len()).await;
        (value > 1).then(|| format!("{key}={value}"))
    }
}

#[async_trait(?Send)]
trait Local {
    async fn local(&mut self, n: u32) -> Result<u32, std::num::ParseIntError>;
}

#[async_trait(?Send)]
impl Local for Db {
    #[traced_async(name = "Db::local")]
    async fn local(&mut self, n: u32) -> Result<u32, std::num::ParseIntError> {
        let parsed: u32 = "40".parse()?;
        if n == 0 {
            return Ok(0);
        }
        Ok(parsed + n)
    }
}

fn assert_send<T: Send>(_: &T) {}

fn main() {
    futures::executor::block_on(async {
        let get = Db.get("ab");
        assert_send(&get);
        assert_eq!(get.await.as_deref(), Some("ab=2"));
        assert_eq!(Db.get_or("a", "none").await, "none");
        assert_eq!(Db.local(2).await, Ok(42));
        assert_eq!(Db.local(0).await, Ok(0));
    });
}
