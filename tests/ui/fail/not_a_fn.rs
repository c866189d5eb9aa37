use async_stack::traced_async;

#[traced_async]
struct Fetcher;

fn main() {
    let _ = Fetcher;
}
