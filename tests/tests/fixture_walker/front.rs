//! Fixture, first file: the front end the test's root awaits.

use async_stack::traced_async;

use crate::router::route;
use crate::store::Trail;

pub const FILE: &str = file!();

#[traced_async]
pub async fn handle(key: u32) -> Trail {
    let (mut trail, line) = (route(key).await, line!());
    trail.awaits.push(line);
    trail
}
