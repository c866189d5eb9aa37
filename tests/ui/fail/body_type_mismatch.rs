// Type errors in the body point into the body, as for a plain `async fn`.
use async_stack::traced_async;

#[traced_async]
async fn fetch() -> u32 {
    "one"
}

#[traced_async]
async fn early() -> u32 {
    if true {
        return "two";
    }
    2
}

#[traced_async]
async fn question_mark() -> Option<u32> {
    let n: u32 = "3".parse()?;
    Some(n)
}

fn main() {}
