use async_stack::traced_async;

#[traced_async]
fn fetch() -> u32 {
    1
}

fn main() {
    // No "cannot find function" error: the fn is still emitted.
    let _ = fetch();
}
