//! Helper for `tests/tests/warn_closed_stderr.rs`: polls one traced future
//! on the main thread, outside any executor (so that a panic inside the
//! library would end the process), then prints what the poll returned.
//!
//! Run with bad values of `ASYNC_STACK_MAX_TASKS` and `ASYNC_STACK_CLOCK`,
//! the first poll makes the library warn twice on stderr: once when the
//! registry is created, once when the clock starts.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use async_stack::traced_async;

#[traced_async(name = "warn-probe")]
async fn probe() {
    std::future::pending::<()>().await;
}

fn main() {
    let mut task = Box::pin(probe());
    let poll = task.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    let state = async_stack::dump()
        .with_name_containing("warn-probe")
        .tasks
        .first()
        .map(|t| t.state);
    println!("pending: {}", poll == Poll::Pending);
    println!("state: {}", state.map_or("none", |s| s.as_str()));
}
