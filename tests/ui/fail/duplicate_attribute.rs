use async_stack::traced_async;

#[traced_async]
#[traced_async(name = "again")]
async fn fetch() {}

fn main() {}
