use async_stack::traced_async;

#[traced_async(name = "a", name = "b")]
async fn fetch() {}

fn main() {}
