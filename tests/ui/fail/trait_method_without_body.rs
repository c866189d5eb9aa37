use async_stack::traced_async;

trait Fetch {
    #[traced_async]
    async fn fetch(&self);
}

fn main() {}
