use async_stack::traced_async;

#[traced_async(name = "")]
async fn fetch() {}

fn main() {}
