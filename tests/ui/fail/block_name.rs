use async_stack::traced_async;

struct Fetcher;

#[traced_async(name = "fetcher")]
impl Fetcher {
    async fn fetch(&self) {}
}

fn main() {
    let _ = Fetcher.fetch();
}
