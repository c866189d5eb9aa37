use async_stack::traced_async;

#[traced_async(name = 42)]
async fn fetch() {}

fn main() {}
