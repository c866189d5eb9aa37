use async_stack::traced_async;
use std::time::Duration;

#[traced_async]
async fn stress_c(n: u32) -> u64 {
    tokio::time::sleep(Duration::from_micros(200)).await;
    u64::from(n)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let h = rt.handle().clone();
    let t = std::thread::spawn(move || {
        let hs: Vec<_> = (0..4)
            .map(|i| h.spawn(async move { stress_c(i).await }))
            .collect();
        for x in hs {
            h.block_on(x).unwrap();
        }
    });
    for _ in 0..2000 {
        let d = async_stack::dump();
        if !d.tasks.is_empty() {
            println!("{d}");
            break;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    t.join().unwrap();
}
