use async_stack::traced_async;

const NAME: &str = "fetch";

#[traced_async(name = NAME)]
async fn fetch() {}

fn main() {}
