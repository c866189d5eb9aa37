//! Fixture, second file: a module with a nested module, so that frames
//! from two modules of one file are on the stack.

use async_stack::traced_async;

use crate::common::yield_once;
use crate::store::Trail;

pub const FILE: &str = file!();

#[traced_async]
pub async fn route(key: u32) -> Trail {
    yield_once().await;
    let (mut trail, line) = (table::dispatch(key).await, line!());
    trail.awaits.push(line);
    trail
}

pub mod table {
    use async_stack::traced_async;

    use crate::store::{Trail, fetch};

    #[traced_async]
    pub async fn dispatch(key: u32) -> Trail {
        let (mut trail, line) = (fetch(key).await, line!());
        trail.awaits.push(line);
        trail
    }
}
