//! A program that panics inside nested traced functions under tokio, for
//! the panic-hook test (`tests/tests/panic_hook.rs`). The lines of the
//! panic and of each `.await` are part of that test's expectations.

use async_stack::traced_async;

#[traced_async]
async fn parse_row(row: u32) -> u32 {
    tokio::task::yield_now().await;
    if row == 7 {
        panic!("row {row} is corrupt");
    }
    row
}

#[traced_async]
async fn load(rows: u32) -> u32 {
    let mut sum = 0;
    for row in 0..rows {
        sum += parse_row(row).await;
    }
    sum
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    async_stack::panic::install_with(
        async_stack::panic::PanicOptions::new().dump_tasks(std::env::args().any(|a| a == "--dump")),
    );
    let result = async_stack::tokio::spawn_named("loader", load(10)).await;
    std::process::exit(if result.is_err() { 101 } else { 0 });
}
