use async_stack::traced_async;

#[traced_async(nmae = "fetch")]
async fn fetch() {}

fn main() {}
