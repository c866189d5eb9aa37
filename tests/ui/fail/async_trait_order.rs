// `#[traced_async]` above `#[async_trait]` sees the impl block.
use async_stack::traced_async;
use async_trait::async_trait;

#[async_trait]
trait Fetch {
    async fn fetch(&self);
}

struct Fetcher;

#[traced_async]
#[async_trait]
impl Fetch for Fetcher {
    async fn fetch(&self) {}
}

fn main() {}
