use async_stack::traced_async;

struct Fetcher;

#[traced_async]
impl Fetcher {
    async fn fetch(&self) {}
}

fn main() {}
