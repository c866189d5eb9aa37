// `#[traced_async]` on an `#[async_trait]` impl block, above or below
// `#[async_trait]`: either way each method is a frame named as with
// `#[traced_async]` on it.
#![deny(warnings)]

use async_stack::traced_async;

#[path = "common/frames.rs"]
mod frames;

use async_trait::async_trait;
use frames::frames;

#[async_trait]
trait Fetch {
    async fn fetch(&self) -> Vec<String>;
}

struct Above;
struct Below;

// Above: async-trait rewrites the methods, `#[traced_async]` included.
#[traced_async]
#[async_trait]
impl Fetch for Above {
    async fn fetch(&self) -> Vec<String> {
        frames()
    }
}

// Below: the block attribute sees the methods async-trait has rewritten.
#[async_trait]
#[traced_async]
impl Fetch for Below {
    async fn fetch(&self) -> Vec<String> {
        frames()
    }
}

fn main() {
    let krate = module_path!();
    futures::executor::block_on(async {
        assert_eq!(
            Above.fetch().await,
            [format!("<{krate}::Above as {krate}::Fetch>::fetch")]
        );
        assert_eq!(
            Below.fetch().await,
            [format!("<{krate}::Below as {krate}::Fetch>::fetch")]
        );
    });
}
