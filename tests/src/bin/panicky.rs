//! A program that panics inside nested traced functions under tokio, for
//! the panic-hook test (`tests/tests/panic_hook.rs`). The lines of the
//! panic and of each `.await` are that test's expectations (flags: `main`).

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

/// Flags: `--dump` appends a dump of all tasks to the report;
/// `--user-hook` sets a hook of the program's own before the async-stack
/// hook is installed (it prints `user hook: <message>`); `--chain` asks the
/// async-stack hook to call the hook set before it.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flag = |name: &str| std::env::args().any(|a| a == name);
    if flag("--user-hook") {
        std::panic::set_hook(Box::new(|info| {
            let message = info.payload().downcast_ref::<String>();
            eprintln!("user hook: {}", message.map_or("?", String::as_str));
        }));
    }
    async_stack::panic::install_with(
        async_stack::panic::PanicOptions::new()
            .dump_tasks(flag("--dump"))
            .call_previous_hook(flag("--chain")),
    );
    let result = async_stack::tokio::spawn_named("loader", load(10)).await;
    std::process::exit(if result.is_err() { 101 } else { 0 });
}
