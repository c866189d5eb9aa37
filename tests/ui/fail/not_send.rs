// A traced future holding a non-Send value across an `.await` is not Send,
// and the error names the value and the `.await`.
use std::rc::Rc;

use async_stack::traced_async;

#[traced_async]
async fn fetch() -> u32 {
    let rc = Rc::new(1);
    std::future::ready(()).await;
    *rc
}

fn assert_send<T: Send>(_: T) {}

fn main() {
    assert_send(fetch());
}
