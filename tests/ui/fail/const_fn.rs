use async_stack::traced_async;

#[traced_async]
const fn fetch() -> u32 {
    1
}

fn main() {
    let _ = fetch();
}
