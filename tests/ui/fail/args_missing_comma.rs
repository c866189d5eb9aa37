use async_stack::traced_async;

#[traced_async(name = "fetch" name = "again")]
async fn fetch() {}

fn main() {}
