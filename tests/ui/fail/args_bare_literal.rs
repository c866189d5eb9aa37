use async_stack::traced_async;

#[traced_async("fetch")]
async fn fetch() {}

fn main() {}
