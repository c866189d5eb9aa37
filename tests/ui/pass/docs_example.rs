// The example of the crate docs of async-stack-macros.
#![deny(warnings)]

use async_stack::traced_async;

#[traced_async]
async fn load_user(id: u64) -> std::io::Result<String> {
    let raw = read_record(id).await?; // a backtrace taken inside `read_record`
    Ok(raw.trim().to_owned()) // shows `load_user` at the line above
}

#[traced_async(name = "storage::read")]
async fn read_record(id: u64) -> std::io::Result<String> {
    Ok(format!("user {id}\n"))
}

fn main() {
    assert_eq!(futures::executor::block_on(load_user(7)).unwrap(), "user 7");
}
