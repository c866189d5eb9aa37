use async_stack::traced_async;
use std::time::Duration;

#[traced_async]
async fn leaf(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

#[traced_async]
async fn mid() {
    futures::join!(leaf(5000), leaf(6000));
}

#[traced_async(name = "topper")]
async fn top() {
    mid().await
}

#[tokio::main]
async fn main() {
    for _ in 0..3 {
        async_stack::tokio::spawn_named("worker", top());
    }
    tokio::spawn(top());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let d = async_stack::dump();
    println!("{d}");
    println!("=====");
    println!("{d:#}");
    println!(
        "{}",
        d.to_json().lines().take(40).collect::<Vec<_>>().join("\n")
    );
}
