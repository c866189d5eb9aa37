//! The debug endpoint beside a small axum service.
//!
//! The service answers `GET /orders/{id}` through traced handlers (a
//! cache lookup, then a slow database read), and a traced background task
//! refreshes the cache. The debug endpoint runs on its own thread
//! (`async_stack::http::serve`), and the same routes are merged into the
//! service's router (`async_stack::http::router()`).
//!
//! `cargo run --example endpoint` serves the service on 127.0.0.1:3000 and
//! the endpoint on 127.0.0.1:6060, prints the `curl` and `go tool pprof`
//! commands to try, and runs until Ctrl-C. With `--once` (or under CI,
//! `CI` set), it picks free ports, sends a few requests, prints the text
//! dump the endpoint serves while they are in flight, and exits.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use async_stack::traced_async;
use axum::Router;
use axum::extract::Path;
use axum::routing::get;

#[traced_async]
async fn db_read(id: u32) -> String {
    // A slow query: long enough to be seen in a dump.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    format!("order {id}: 3 items")
}

#[traced_async]
async fn cache_lookup(id: u32) -> Option<String> {
    tokio::task::yield_now().await;
    (id == 0).then(|| "order 0: cached".to_owned())
}

#[traced_async]
async fn load_order(id: u32) -> String {
    match cache_lookup(id).await {
        Some(order) => order,
        None => db_read(id).await,
    }
}

async fn get_order(Path(id): Path<u32>) -> String {
    load_order(id).await + "\n"
}

#[traced_async]
async fn refresh_cache() {
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// The body of `GET path` at `addr`, read by a plain blocking client.
fn fetch(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let once = std::env::args().any(|a| a == "--once") || std::env::var_os("CI").is_some();
    let (service_addr, debug_addr) = if once {
        ("127.0.0.1:0", "127.0.0.1:0")
    } else {
        ("127.0.0.1:3000", "127.0.0.1:6060")
    };

    // The endpoint on its own thread and runtime: it answers even when
    // every worker of this runtime is stuck.
    let debug = async_stack::http::serve(debug_addr)?;
    let debug_addr = debug.local_addr();

    let app = Router::new()
        .route("/orders/{id}", get(get_order))
        .merge(async_stack::http::router());
    let listener = tokio::net::TcpListener::bind(service_addr).await?;
    let service = listener.local_addr()?;
    drop(async_stack::tokio::spawn_named(
        "cache-refresher",
        refresh_cache(),
    ));
    tokio::spawn(async move { axum::serve(listener, app).await });

    println!("service:        http://{service}/orders/7");
    println!("debug endpoint: http://{debug_addr}/debug/pprof/ (also on the service)");
    println!();
    println!("try:");
    println!("  curl http://{service}/orders/7 &");
    println!("  curl 'http://{debug_addr}/debug/pprof/goroutine?debug=2'");
    println!("  curl 'http://{debug_addr}/debug/pprof/goroutine?debug=1'");
    println!("  curl http://{debug_addr}/debug/async/tasks.json");
    println!("  curl 'http://{debug_addr}/debug/async/wakes?seconds=5&format=dot'");
    println!("  go tool pprof -top http://{debug_addr}/debug/pprof/goroutine");
    println!("  go tool pprof -top 'http://{debug_addr}/debug/pprof/profile?seconds=5'");

    if once {
        let requests: Vec<_> = [7, 8]
            .into_iter()
            .map(|id| tokio::task::spawn_blocking(move || fetch(service, &format!("/orders/{id}"))))
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let dump = tokio::task::spawn_blocking(move || {
            fetch(debug_addr, "/debug/pprof/goroutine?debug=2")
        })
        .await??;
        println!("\n$ curl 'http://{debug_addr}/debug/pprof/goroutine?debug=2'");
        println!(
            "{}",
            dump.split_once("\r\n\r\n").map_or(&*dump, |(_, body)| body)
        );
        for request in requests {
            let reply = request.await??;
            println!("{}", reply.lines().last().unwrap_or(""));
        }
        return Ok(());
    }
    println!("\nCtrl-C to stop");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
